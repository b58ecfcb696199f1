"""nginx.org annotations: NIC's validation messages (kinds/ingress/parse/annotations.py),
the ConfigMap as defaults (kinds/ingress/records/options.py), and mergeable rules
(kinds/ingress/records/mergeable.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from ferryman.kinds.ingress.parse.annotations import validate
from ferryman.kinds.ingress.parse.ingress import parse_ingress
from ferryman.kinds.ingress.records import hosts as hosts_module
from ferryman.kinds.ingress.records import options as options_module
from ferryman.kinds.ingress.records.mergeable import merge, minion_annotations, minion_event
from ferryman.kinds.ingress.records.options import IngressOptions, ingress_options
from ferryman.resources.meta import InvalidResource
from testkit import harness
from testkit.controller_kit import Kit


def _problems(annotations: dict[str, str]) -> list[str]:
    _, problems, _ = validate(annotations, frozenset({"app"}), hostless=False)
    return [str(p) for p in problems]


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        (
            {"nginx.org/proxy-connect-timeout": "10x"},
            'annotations.nginx.org/proxy-connect-timeout: Invalid value: "10x": must be a time',
        ),
        (
            {"nginx.org/client-max-body-size": "1t"},
            'annotations.nginx.org/client-max-body-size: Invalid value: "1t": must be an offset',
        ),
        (
            {"nginx.org/proxy-buffering": "yes"},
            'annotations.nginx.org/proxy-buffering: Invalid value: "yes": must be a boolean',
        ),
        (
            {"nginx.org/max-fails": "-1"},
            'annotations.nginx.org/max-fails: Invalid value: "-1": must be a non-negative integer',
        ),
        (
            {"nginx.org/keepalive": "many"},
            'annotations.nginx.org/keepalive: Invalid value: "many": must be an integer',
        ),
        (
            {"nginx.org/proxy-buffers": "8"},
            'annotations.nginx.org/proxy-buffers: Invalid value: "8": must be a proxy buffer spec',
        ),
        ({"nginx.org/lb-method": ""}, "annotations.nginx.org/lb-method: Required value"),
        (
            {"nginx.org/hsts": "maybe", "nginx.org/hsts-max-age": "1"},
            "annotations.nginx.org/hsts-max-age: Forbidden: related annotation nginx.org/hsts: "
            'strconv.ParseBool: parsing "maybe": invalid syntax',
        ),
        (
            {"nginx.org/basic-auth-realm": "x"},
            "annotations.nginx.org/basic-auth-realm: Forbidden: related annotation "
            "nginx.org/basic-auth-secret: must be set",
        ),
        (
            {"nginx.org/ssl-services": "app,db"},
            'annotations.nginx.org/ssl-services: Invalid value: "app,db": must be a '
            "comma-separated list of services. The following services were not found: db",
        ),
        (
            {"nginx.org/rewrites": "service=app rewrite=/"},
            'annotations.nginx.org/rewrites: Invalid value: "service=app rewrite=/": '
            "'service=app' is not a valid serviceName format, e.g. 'serviceName=tea-svc'",
        ),
        (
            {"nginx.org/listen-ports": "80,0"},
            'annotations.nginx.org/listen-ports: Invalid value: "80,0": must be a '
            "comma-separated list of port numbers",
        ),
        (
            {"nginx.org/path-regex": "yes"},
            'annotations.nginx.org/path-regex: Invalid value: "yes": allowed values: '
            "'case_sensitive', 'case_insensitive' or 'exact'",
        ),
        (
            {"nginx.org/mergeable-ingress-type": "boss"},
            'annotations.nginx.org/mergeable-ingress-type: Invalid value: "boss": must be one '
            "of: 'master' or 'minion'",
        ),
    ],
)
def test_nic_messages(annotations: dict[str, str], message: str) -> None:
    assert message in _problems(annotations)


def test_valid_values_and_unknown_annotations() -> None:
    parsed, problems, warnings = validate(
        {
            "nginx.org/proxy-read-timeout": "1m 30s",
            "nginx.org/lb-method": "hash $request_uri consistent",
            "nginx.org/proxy-next-upstream": "error timeout http_502",
            "nginx.org/proxy-reed-timeout": "1s",
            "nginx.org/custom-http-errors": "404",  # NIC's, not applied: ingress_options warns
            "example.com/other": "x",
        },
        frozenset(),
        hostless=False,
    )
    assert problems == []
    assert parsed["proxy-read-timeout"] == 90_000
    assert warnings == ["annotation nginx.org/proxy-reed-timeout is not a NIC annotation: ignored"]


def test_annotation_over_configmap_over_default() -> None:
    configmap = {
        "proxy-read-timeout": "30s",
        "lb-method": "least_conn",
        "hsts": "true",
        "max-fails": "not a number",  # reported by the ConfigMap's reader: default kept
    }
    options, _ = ingress_options({"nginx.org/proxy-read-timeout": "5s"}, configmap)
    assert options.read_timeout_ms == 5_000  # the annotation
    assert options.lb_method == "least_conn"  # the ConfigMap
    assert options.max_fails == 1  # the built-in default
    assert options.slow()
    # Keys the ConfigMap's reader writes into nginx.conf are NGINX's already:
    # no record repeats them (an Ingress without annotations stays fast).
    inherited, _ = ingress_options({}, configmap)
    assert inherited.read_timeout_ms is None and inherited.hsts is None
    _, warnings = ingress_options(
        {"nginx.org/client-max-body-size": "5m"}, {"client-max-body-size": "10m"}
    )
    assert warnings == []  # within the server's 10m: applied
    plain, warnings = ingress_options({}, {})
    assert plain == IngressOptions() and not plain.slow() and warnings == []


def test_not_per_request_values_warn() -> None:
    _, warnings = ingress_options(
        {
            "nginx.org/client-max-body-size": "10m",
            "nginx.org/proxy-max-temp-file-size": "0",
            "nginx.org/location-snippets": "deny all;",
            "nginx.org/listen-ports": "8080",
            "nginx.org/use-cluster-ip": "true",
            "nginx.org/custom-http-errors": "404",
        },
        {},
    )
    text = " ".join(warnings)
    for part in (
        "proxy_max_temp_file_size",
        "snippets",
        "nginx.org/custom-http-errors: not implemented",
    ):
        assert part in text
    # Implemented since (kinds/ingress/records/ports.py, configs/endpoints.py, a body
    # limit above the server's checked by the data plane): no warning.
    assert "listen-ports" not in text and "use-cluster-ip" not in text
    assert "client-max-body-size" not in text


def _ing(name: str, kind: str, path: str | None, created: str, ns: str = "default") -> Any:
    rule: dict[str, Any] = {"host": "cafe.test"}
    if path:
        rule["http"] = {
            "paths": [
                {
                    "path": path,
                    "pathType": "Prefix",
                    "backend": {"service": {"name": "app", "port": {"number": 80}}},
                }
            ]
        }
    annotations = {"nginx.org/mergeable-ingress-type": kind, "nginx.org/max-fails": "3"}
    if kind == "minion":
        annotations["nginx.org/hsts"] = "true"
    return parse_ingress(
        {
            "metadata": {
                "name": name,
                "namespace": ns,
                "creationTimestamp": created,
                "annotations": annotations,
            },
            "spec": {"rules": [rule]},
        }
    )


def test_merge_conflicts_inheritance_and_orphans() -> None:
    master = _ing("m", "master", None, "2024-01-01T00:00:00Z")
    old = _ing("old", "minion", "/a", "2024-01-01T00:00:00Z", ns="b")
    young = _ing("young", "minion", "/a", "2025-01-01T00:00:00Z", ns="a")
    merged = merge("cafe.test", [master, old, young])
    kept = {m.meta.name: [p.path for p in m.rules[0].paths] for m in merged.minions}
    assert kept == {"old": ["/a"], "young": []}
    assert merged.warnings == {"a/young": ["path /a is taken by another resource"]}
    own, warned = minion_annotations(young, master)
    assert own["nginx.org/max-fails"] == "3" and "nginx.org/hsts" not in own
    assert warned == ["annotations nginx.org/hsts are not allowed on a minion Ingress: ignored"]
    assert minion_event(young, [young, old], [])[1:] == (
        "NoIngressMasterFound",
        "Ingress master is invalid or doesn't exist",
    )
    assert young.hosts() == () and master.hosts() == ("cafe.test",)


def test_master_and_minion_specs() -> None:
    with pytest.raises(InvalidResource) as e:
        _ing("m", "master", "/a", "2024-01-01T00:00:00Z")
    assert "spec.rules[0].http.paths: Too many: 1: must have at most 0 items" in str(e.value)
    with pytest.raises(InvalidResource) as e:
        _ing("n", "minion", None, "2024-01-01T00:00:00Z")
    assert "spec.rules[0].http.paths: Required value: must include at least one path" in str(
        e.value
    )


def test_configmap_defaults_reach_the_fast_path_record() -> None:
    from ferryman.configs.secret_state import SecretState
    from ferryman.kinds.ingress.records.hosts import ingress_records
    from ferryman.kinds.ingress.records.virtual_hosts import virtual_hosts

    ing = parse_ingress(
        {
            "metadata": {"name": "a", "namespace": "default"},
            "spec": {
                "tls": [{"hosts": ["cafe.test"], "secretName": "s"}],
                "rules": [
                    {
                        "host": "cafe.test",
                        "http": {
                            "paths": [
                                {
                                    "path": "/",
                                    "pathType": "Prefix",
                                    "backend": {"service": {"name": "app", "port": {"number": 80}}},
                                }
                            ]
                        },
                    }
                ],
            },
        }
    )
    vhosts, _ = virtual_hosts(ing, ["cafe.test"], {"s": SecretState("id", None)})
    configmap = {"lb-method": "least_conn", "max-fails": "3", "ssl-redirect": "false"}
    out = ingress_records(ing, vhosts, None, "ferryman", configmap)  # type: ignore[arg-type]
    (written,) = out.written
    assert written.routing is None  # still the fast path
    assert written.host.balancing == "lc:3:10" and not written.host.redirect_https


def test_ingresses_sharing_annotations_resolve_their_options_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A start resolves the options of each set of annotations (and ConfigMap
    keys) once, not once per Ingress; the warnings are each caller's own list."""
    calls: list[int] = []
    resolve = options_module._options

    def counted(*args: Any) -> Any:
        calls.append(1)
        return resolve(*args)

    monkeypatch.setattr(options_module, "_options", counted)
    options_module._remembered.cache_clear()
    kit = Kit(tmp_path)
    team = {"nginx.org/proxy-read-timeout": "30s", "nginx.org/server-snippets": "x"}
    kit.add(
        *(
            harness.ingress(
                f"i{n}", [harness.rule(f"h{n}.test", harness.path("/", "app"))], annotations=team
            )
            for n in range(200)
        )
    )
    asyncio.run(kit.drain())
    assert ("H", "h199.test") in kit.dataplane.records
    assert len(calls) == 1  # 200 before
    options, warnings = ingress_options(team, {})
    warnings.append("mine")
    assert ingress_options(team, {}) == (
        options,
        ["nginx.org/server-snippets: snippets are not supported by ferryman; ignored"],
    )


def test_options_and_hosts_already_as_wanted_are_not_copied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An Ingress asking for nothing special keeps its options and virtual hosts
    as they are (a start copied both for each Ingress: 4.6% of its CPU)."""
    copies: list[str] = []
    copy = hosts_module.replace

    def counted(obj: Any, **changes: Any) -> Any:
        copies.append(type(obj).__name__)
        return copy(obj, **changes)

    monkeypatch.setattr(hosts_module, "replace", counted)
    kit = Kit(tmp_path)
    kit.add(
        *(
            harness.ingress(f"i{n}", [harness.rule(f"h{n}.test", harness.path("/", "app"))])
            for n in range(50)
        )
    )
    asyncio.run(kit.drain())
    assert ("H", "h49.test") in kit.dataplane.records
    assert copies == []  # before: 100, an IngressOptions and a VirtualHost per Ingress
