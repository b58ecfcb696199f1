"""--ingress-nginx-configmap in manifests mode, with real NGINX: a migrating
cluster's ingress-nginx ConfigMap keys take effect as ingress-nginx gave them,
under NIC's ConfigMap, with a Warning per key not applied
(configs/ingress_nginx_configmap.py)."""

from __future__ import annotations

from typing import Any

from testkit.configmap_docs import NAME, NS, configmap
from testkit.harness import (
    Backends,
    Ferryman,
    eventually,
    ingress,
    path,
    rule,
    service_with_backends,
)

INN_NS, INN_NAME = "ingress-nginx", "ingress-nginx-controller"


def _inn(**data: str) -> dict[str, Any]:
    return configmap(name=INN_NAME, namespace=INN_NS, **data)


def _events(f: Ferryman) -> list[tuple[str, str]]:
    return [
        (e["reason"], e["message"])
        for e in f.events()
        if e.get("kind") == "ConfigMap" and e.get("name") == INN_NAME
    ]


def _start(f: Ferryman, backends: Backends, *docs: tuple[str, dict[str, Any]]) -> None:
    f.extra_args += ["--ingress-nginx-configmap", f"{INN_NS}/{INN_NAME}"]
    f.write("svc", service_with_backends("app", [backends.start("app")]))
    f.write("ing", ingress("app", [rule("cm.test", path("/", "app"))]))
    for name, doc in docs:
        f.write(name, doc)
    f.start()


def test_keys_apply_as_ingress_nginx_gave_them(ferryman: Ferryman, backends: Backends) -> None:
    f = ferryman
    _start(
        f,
        backends,
        (
            "inn",
            _inn(
                proxy_body_size="1k",
                use_forwarded_headers="true",
                proxy_real_ip_cidr="127.0.0.1/32",
                proxy_read_timeout="1",
                enable_brotli="true",
                proxy_conect_timeout="5",
                http_snippet="lua_shared_dict x 1m;",
            ),
        ),
    )
    eventually(lambda: f.get("cm.test", "/?delay=1.5").status == 504, 60, "read timeout 1 s")
    assert f.get("cm.test", "/", method="POST", content=b"x" * 1025).status == 413
    forwarded = {"X-Forwarded-For": "203.0.113.7"}
    assert f.get("cm.test", headers=forwarded).json()["headers"]["x-real-ip"] == "203.0.113.7"
    events = _events(f)
    (notes,) = [m for r, m in events if r == "NotApplied"]
    assert notes == (
        f"ConfigMap {INN_NS}/{INN_NAME}: not applied: "
        "enable-brotli: not applied by ferryman yet; "
        "http-snippet: NGINX text from users is never applied (ferryman); "
        "proxy-conect-timeout: not an ingress-nginx ConfigMap key (misspelt?): ignored"
    )
    # An edit applies like NIC's ConfigMap's: one reload, the new value live.
    reloads = f.reloads()
    f.write("inn", _inn(proxy_body_size="4k"))
    eventually(
        lambda: f.get("cm.test", "/", method="POST", content=b"x" * 2048).status == 200, 60, "4k"
    )
    # The old workers may answer a moment longer (test_configmap.py's _soon).
    eventually(lambda: f.get("cm.test", "/?delay=1.5").status == 200, 60, "the default timeout")
    f.reloads_reach(reloads + 1)


def test_nics_configmap_wins_and_says_so(ferryman: Ferryman, backends: Backends) -> None:
    f = ferryman
    f.extra_args += ["--nginx-configmaps", f"{NS}/{NAME}"]
    _start(
        f,
        backends,
        ("cm", configmap(client_max_body_size="2k")),
        ("inn", _inn(proxy_body_size="1k")),
    )
    eventually(
        lambda: f.get("cm.test", "/", method="POST", content=b"x" * 1500).status == 200,
        60,
        "NIC's 2k",
    )
    assert f.get("cm.test", "/", method="POST", content=b"x" * 2049).status == 413
    assert (
        "NotApplied",
        f"ConfigMap {INN_NS}/{INN_NAME}: not applied: client-max-body-size: the NIC "
        "ConfigMap's value is used (--nginx-configmaps)",
    ) in _events(f)
