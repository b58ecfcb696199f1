"""``ferryman migrate``: the report on ingress-nginx Ingresses
(tests/data/ingress-nginx), its verdicts (those of parse_ingress), its exit
code, and the Gateway API objects it writes (taken by ferryman's own parsers)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from ferryman.app import migrate, migrate_gateway
from ferryman.kinds.gateway.parse import gateway_api
from ferryman.kinds.gateway.parse.tls_route import parse_tls_route
from ferryman.kinds.ingress.parse import ingress_nginx
from ferryman.resources import reference_grant

DATA = Path(__file__).parent.parent / "data" / "ingress-nginx"
FERRYMAN = Path(sys.executable).parent / "ferryman"
P = ingress_nginx.PREFIX


def _reports() -> dict[str, migrate.IngressReport]:
    objects, problems = migrate.read_manifests(DATA)
    assert problems == []
    return {f"{r.namespace}/{r.name}": r for r in migrate.reports(objects)}


def _ingress(annotations: Mapping[str, str], path: str = "/", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": "one", "namespace": "ns", "annotations": dict(annotations)},
        "spec": {
            "ingressClassName": "nginx",
            "rules": [
                {
                    "host": "a.example.com",
                    "http": {
                        "paths": [
                            {
                                "path": path,
                                "pathType": "Prefix",
                                "backend": {"service": {"name": "svc", "port": {"number": 80}}},
                            }
                        ]
                    },
                }
            ],
            **spec,
        },
    }


def test_every_data_file_is_read_with_its_documents() -> None:
    reports = _reports()
    assert len(reports) == 15
    assert reports["shop/web-canary"].source.endswith("02-canary.yaml (document 2)")


def test_verdicts_are_parse_ingress_s() -> None:
    reports = _reports()
    assert reports["shop/legacy"].verdict == migrate.REJECTED  # snippets
    assert any("configuration-snippet: refused" in e for e in reports["shop/legacy"].errors)
    # A regular expression as a Prefix path, without use-regex: rejected, as a run would.
    assert reports["web/badpath"].verdict == migrate.REJECTED
    assert any("spec.rules[0].http.paths[0].path" in e for e in reports["web/badpath"].errors)
    assert reports["web/typos"].verdict == migrate.WARNINGS
    assert reports["shop/limited"].verdict == migrate.SERVED
    assert migrate.exit_code(list(reports.values())) == 1
    assert migrate.exit_code([reports["shop/limited"]]) == 0


def test_each_annotation_says_how_it_is_served_as_the_table_does() -> None:
    for r in _reports().values():
        for a in r.annotations:
            e = ingress_nginx.entry(a.key.removeprefix(P))
            assert a.status == (migrate.UNKNOWN if e is None else e.status), a.key
            if e is not None:
                assert a.note == e.note


def test_served_annotations_name_what_they_become() -> None:
    limited = {a.key: a for a in _reports()["shop/limited"].annotations}
    assert limited[P + "limit-rps"].becomes["nginx.org/limit-req-rate"] == "10r/s"
    assert limited[P + "proxy-connect-timeout"].becomes == {"nginx.org/proxy-connect-timeout": "5s"}


def test_an_allow_list_is_reported_with_the_limits_it_exempts_from() -> None:
    obj = _ingress(
        {
            P + "limit-rps": "10",
            P + "limit-whitelist": "10.0.0.0/8",
            P + "limit-connections": "lots",
            P + "default-backend": "errors",
        }
    )
    report = migrate.report(obj, "x")
    by_key = {a.key: a for a in report.annotations}
    whitelist = by_key[P + "limit-whitelist"]
    assert (whitelist.status, whitelist.becomes, whitelist.said) == (migrate.SERVED, {}, [])
    assert by_key[P + "limit-rps"].becomes["nginx.org/limit-req-rate"] == "10r/s"
    assert any("'lots' must be a whole number" in m for m in by_key[P + "limit-connections"].said)
    assert by_key[P + "default-backend"].status == ingress_nginx.DIFFERS
    assert report.verdict == migrate.WARNINGS


def test_a_typo_is_unknown_with_the_name_it_likely_meant() -> None:
    typos = {a.key: a for a in _reports()["web/typos"].annotations}
    assert typos[P + "proxy-body-szie"].status == migrate.UNKNOWN
    assert f"did you mean {P}proxy-body-size?" in typos[P + "proxy-body-szie"].note
    # A known name with a value ingress-nginx would not take: said with it.
    assert any("whole number of seconds" in m for m in typos[P + "proxy-read-timeout"].said)


def test_the_nginx_class_says_how_to_serve_it() -> None:
    reports = _reports()
    assert "--ingress-class nginx" in reports["shop/web"].class_note
    assert reports["shop/api"].class_note.startswith("kubernetes.io/ingress.class: nginx")
    report = migrate.report({**_ingress({}), "spec": {**_ingress({})["spec"]}}, "x")
    assert report.class_name == "nginx"


def test_an_ingress_without_a_namespace_is_read_as_default_s() -> None:
    obj = _ingress({P + "proxy-body-size": "1m"})
    del obj["metadata"]["namespace"]
    assert migrate.report(obj, "x").verdict == migrate.SERVED


def test_json_has_every_ingress_and_a_summary() -> None:
    reports = list(_reports().values())
    out = json.loads(json.dumps(migrate.as_json(reports, [])))
    # Counted, not written down: other annotations become served as the table grows.
    assert sum(out["summary"].values()) == 15
    assert out["summary"]["rejected"] == sum(r.verdict == migrate.REJECTED for r in reports)
    assert {i["name"] for i in out["ingresses"]} >= {"legacy", "typos"}


def _parse(obj: Mapping[str, Any]) -> list[str]:
    parse = {
        "Gateway": gateway_api.parse_gateway,
        "HTTPRoute": gateway_api.parse_http_route,
        "TLSRoute": parse_tls_route,
        "ReferenceGrant": reference_grant.parse_reference_grant,
    }[obj["kind"]]
    parsed = parse(obj)
    return [str(p) for p in parsed.problems]


def _converted() -> migrate_gateway.Converted:
    objects, _ = migrate.read_manifests(DATA)
    return migrate_gateway.convert([o for o, _ in objects])


def _route(converted: migrate_gateway.Converted, name: str) -> dict[str, Any]:
    [route] = [
        o for o in converted.objects if o["kind"] == "HTTPRoute" and o["metadata"]["name"] == name
    ]
    return route


def test_every_gateway_api_object_is_taken_by_ferryman_s_parsers() -> None:
    converted = _converted()
    assert [o["kind"] for o in converted.objects].count("Gateway") == 1
    for obj in converted.objects:
        assert _parse(obj) == [], obj


def test_a_weighted_canary_becomes_weighted_backend_refs() -> None:
    converted = _converted()
    [rule] = _route(converted, "web")["spec"]["rules"]
    assert rule["backendRefs"] == [
        {"name": "web-stable", "port": 8080, "weight": 80},
        {"name": "web-canary", "port": 8080, "weight": 20},
    ]
    assert rule["timeouts"] == {"backendRequest": "120s"}
    assert "canary" in converted.not_expressed["shop/web-canary"][0]


def test_tls_gets_a_listener_and_ssl_redirect_a_route_on_http() -> None:
    converted = _converted()
    [gateway] = [o for o in converted.objects if o["kind"] == "Gateway"]
    https = [li for li in gateway["spec"]["listeners"] if li["protocol"] == "HTTPS"]
    assert [li["hostname"] for li in https] == ["secure.example.com"]
    secure = _route(converted, "secure")
    assert secure["spec"]["parentRefs"][0]["sectionName"] == https[0]["name"]
    [headers] = secure["spec"]["rules"][0]["filters"]
    assert headers["requestHeaderModifier"]["set"] == [
        {"name": "Host", "value": "internal.shop.svc"},
        {"name": "X-Forwarded-Prefix", "value": "/shop"},
    ]
    redirect = _route(converted, "secure-redirect")
    assert redirect["spec"]["parentRefs"][0]["sectionName"] == "http"
    assert redirect["spec"]["rules"][0]["filters"][0]["requestRedirect"]["scheme"] == "https"
    assert any(o["kind"] == "ReferenceGrant" for o in converted.objects)


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        (
            {P + "rewrite-target": "/api"},
            {
                "type": "URLRewrite",
                "urlRewrite": {
                    "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/api"}
                },
            },
        ),
        (
            {P + "permanent-redirect": "https://new.example.com/x"},
            {
                "type": "RequestRedirect",
                "requestRedirect": {
                    "statusCode": 301,
                    "scheme": "https",
                    "hostname": "new.example.com",
                    "path": {"type": "ReplaceFullPath", "replaceFullPath": "/x"},
                },
            },
        ),
    ],
)
def test_annotations_with_a_gateway_api_filter(
    annotations: dict[str, str], expected: dict[str, Any]
) -> None:
    converted = migrate_gateway.convert([_ingress(annotations)])
    route = _route(converted, "one")
    assert route["spec"]["rules"][0]["filters"] == [expected]
    assert _parse(route) == []


def test_capture_groups_and_unparsable_paths_are_listed_not_written() -> None:
    converted = _converted()
    assert any("capture groups" in m for m in converted.not_expressed["shop/rewrite"])
    assert any("not written" in m for m in converted.not_expressed["web/badpath"])
    assert any("auth-type" in m for m in converted.not_expressed["ops/admin"])


def _ferryman(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(FERRYMAN), "migrate", *argv], capture_output=True, text=True, timeout=120
    )


def test_the_command_reports_the_directory_and_exits_1_for_a_rejection(tmp_path: Path) -> None:
    result = _ferryman(
        "--manifests", str(DATA), "--to", "gateway-api", "--output-dir", str(tmp_path)
    )
    assert result.returncode == 1, result.stderr
    out = result.stdout
    assert "Ingress shop/legacy (" in out and "): rejected" in out
    assert f"{P}server-snippet: refused: " in out
    assert "becomes nginx.org/client-max-body-size: '8m'" in out
    assert f"{P}proxy-body-szie: unknown: " in out
    counts = migrate.as_json(list(_reports().values()), [])["summary"]
    assert (
        f"15 Ingress(es): {counts['served']} served, {counts['served with warnings']} "
        f"served with warnings, {counts['rejected']} rejected"
    ) in out
    written = sorted(p.name for p in tmp_path.iterdir())
    assert "gateway-default-nginx.yaml" in written
    assert "httproute-shop-web.yaml" in written
    for path in tmp_path.iterdir():
        assert _parse(yaml.safe_load(path.read_text())) == []


def test_the_command_exits_0_when_all_would_be_served(tmp_path: Path) -> None:
    for name in ("05-whitelist.yaml", "09-limit-rps.yaml"):
        (tmp_path / name).write_text((DATA / name).read_text())
    result = _ferryman("--manifests", str(tmp_path), "--output", "json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["summary"]["served"] == 2


def test_the_command_refuses_to_without_an_output_dir() -> None:
    result = _ferryman("--manifests", str(DATA), "--to", "gateway-api")
    assert result.returncode == 2
    assert "--output-dir" in result.stderr


def test_a_tls_host_another_namespace_has_the_listener_of_gets_no_redirect_route() -> None:
    tls = [{"hosts": ["a.example.com"], "secretName": "a-tls"}]
    first = _ingress({}, tls=tls)
    second = _ingress({}, tls=tls)
    second["metadata"]["namespace"] = "other"
    converted = migrate_gateway.convert([first, second])
    names = [
        (o["kind"], o["metadata"]["namespace"], o["metadata"]["name"]) for o in converted.objects
    ]
    assert ("HTTPRoute", "ns", "one-redirect") in names
    assert ("HTTPRoute", "other", "one-redirect") not in names
    for obj in converted.objects:
        assert _parse(obj) == [], obj


def test_a_canary_is_served_with_its_main_only() -> None:
    reports = _reports()
    assert reports["shop/web-canary"].verdict == migrate.SERVED  # its main is read too
    main = _ingress({})
    lonely = _ingress({P + "canary": "true", P + "canary-weight": "10"}, "/beta")
    lonely["metadata"]["name"] = "lonely"
    second = _ingress({P + "canary": "true"}, "/beta")
    second["metadata"]["name"] = "second"
    found = {r.name: r for r in migrate.reports([(main, "a"), (lonely, "b"), (second, "c")])}
    assert found["one"].verdict == migrate.SERVED
    assert found["lonely"].verdict == migrate.REJECTED
    assert found["lonely"].errors == [
        "canary not served: a.example.com/beta: no main Ingress serves it"
    ]
    assert found["second"].verdict == migrate.REJECTED
    assert migrate.exit_code(list(found.values())) == 1
    # The main gains /beta: the older canary joins it, the other is left out.
    main["spec"]["rules"][0]["http"]["paths"].append(
        {
            "path": "/beta",
            "pathType": "Prefix",
            "backend": {"service": {"name": "svc", "port": {"number": 80}}},
        }
    )
    found = {r.name: r for r in migrate.reports([(main, "a"), (lonely, "b"), (second, "c")])}
    assert found["lonely"].verdict == migrate.SERVED
    assert found["second"].errors == [
        "canary not served: a.example.com/beta: ns/lonely is already its canary "
        "(one canary per rule)"
    ]


def test_a_header_and_cookie_canary_becomes_header_rules_before_the_split() -> None:
    main = _ingress({})
    canary = _ingress(
        {
            P + "canary": "true",
            P + "canary-by-header": "X-Canary",
            P + "canary-by-cookie": "beta",
            P + "canary-weight": "10",
        }
    )
    canary["metadata"]["name"] = "beta"
    canary["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]["name"] = "new"
    converted = migrate_gateway.convert([main, canary])
    assert "canary: folded" in converted.not_expressed["ns/beta"][0]
    assert converted.not_expressed["ns/one"] == []  # written: ferryman's parser takes it
    rules = _route(converted, "one")["spec"]["rules"]
    main_ref = {"name": "svc", "port": 80}
    canary_ref = {"name": "new", "port": 80}
    cookie = r"^(.*;\s*)?beta={}(;.*)?$"
    assert [(r["matches"][0].get("headers"), r["backendRefs"]) for r in rules] == [
        ([{"type": "Exact", "name": "X-Canary", "value": "always"}], [canary_ref]),
        ([{"type": "Exact", "name": "X-Canary", "value": "never"}], [main_ref]),
        (
            [{"type": "RegularExpression", "name": "Cookie", "value": cookie.format("always")}],
            [canary_ref],
        ),
        (
            [{"type": "RegularExpression", "name": "Cookie", "value": cookie.format("never")}],
            [main_ref],
        ),
        (None, [{**main_ref, "weight": 90}, {**canary_ref, "weight": 10}]),
    ]
    assert all(r["matches"][0]["path"] == {"type": "PathPrefix", "value": "/"} for r in rules)


def test_ssl_passthrough_becomes_a_tls_listener_and_a_tls_route() -> None:
    """Each host: a Passthrough listener on 443 and a TLSRoute to its '/' path's
    Service; no HTTPS listener for it (ingress-nginx never ends TLS there); the
    HTTPRoute stays for port 80."""
    one = _ingress(
        {P + "ssl-passthrough": "true"},
        tls=[{"hosts": ["a.example.com"], "secretName": "a-tls"}],
    )
    one["spec"]["rules"].append({"host": "b.example.com", "http": {"paths": []}})
    converted = migrate_gateway.convert([one], namespace="gw")
    [gateway] = [o for o in converted.objects if o["kind"] == "Gateway"]
    assert [(li["protocol"], li.get("hostname")) for li in gateway["spec"]["listeners"]] == [
        ("HTTP", None),
        ("TLS", "a.example.com"),
    ]
    assert gateway["spec"]["listeners"][1]["tls"] == {"mode": "Passthrough"}
    [route] = [o for o in converted.objects if o["kind"] == "TLSRoute"]
    assert route["metadata"] == {"name": "one-passthrough-1", "namespace": "ns"}
    assert route["spec"] == {
        "parentRefs": [{"name": "nginx", "namespace": "gw", "sectionName": "tls-1"}],
        "hostnames": ["a.example.com"],
        "rules": [{"backendRefs": [{"name": "svc", "port": 80}]}],
    }
    assert _route(converted, "one")["spec"]["parentRefs"] == [{"name": "nginx", "namespace": "gw"}]
    assert converted.not_expressed["ns/one"] == [
        f"{P}ssl-passthrough: b.example.com has no '/' path or defaultBackend with a port number"
    ]
    for obj in converted.objects:
        assert _parse(obj) == [], obj
