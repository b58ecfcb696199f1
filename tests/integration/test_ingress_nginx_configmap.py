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
    tls_secret,
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


def _start(
    f: Ferryman, backends: Backends, *docs: tuple[str, dict[str, Any]], tls: bool = False
) -> None:
    f.extra_args += ["--ingress-nginx-configmap", f"{INN_NS}/{INN_NAME}"]
    f.write("svc", service_with_backends("app", [backends.start("app")]))
    spec_tls = [{"hosts": ["cm.test"], "secretName": "cert"}] if tls else None
    if tls:
        f.write("cert", tls_secret("cert", ["cm.test"]))
    f.write("ing", ingress("app", [rule("cm.test", path("/", "app"))], tls=spec_tls))
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


def test_hsts_as_ingress_nginx_sends_it(ferryman: Ferryman, backends: Backends) -> None:
    # ingress-nginx's hsts-preload is false unless set; NIC's header always
    # carries preload (test_configmap.py), which asks browsers' preload lists
    # to take the domain: never sent for an ingress-nginx ConfigMap that did not.
    f = ferryman
    _start(f, backends, ("inn", _inn(hsts="true", hsts_max_age="100")), tls=True)

    def header() -> str | None:
        return f.get("cm.test", https=True).headers.get("strict-transport-security")

    eventually(lambda: header() == "max-age=100", 60, "HSTS without preload")
    f.write("inn", _inn(hsts="true", hsts_max_age="100", hsts_preload="true"))
    eventually(lambda: header() == "max-age=100; preload", 60, "hsts-preload: true")
    assert not [m for r, m in _events(f) if r == "NotApplied"]
    # An Ingress's own nginx.org/hsts: the ConfigMap's preload choice too.
    f.write("inn", _inn(hsts_preload="false"))
    f.write(
        "ing",
        ingress(
            "app",
            [rule("cm.test", path("/", "app"))],
            tls=[{"hosts": ["cm.test"], "secretName": "cert"}],
            annotations={"nginx.org/hsts": "true", "nginx.org/hsts-max-age": "7"},
        ),
    )
    eventually(lambda: header() == "max-age=7", 60, "the Ingress's HSTS, no preload")
