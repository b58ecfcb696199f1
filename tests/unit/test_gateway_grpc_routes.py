"""GRPCRoute: its parser's rules (v1's CRD and CEL), method matches as the path
matches the route engine serves, its attachment beside HTTPRoutes (listeners'
supportedKinds, the older of an HTTPRoute and a GRPCRoute sharing hostnames,
GRPCRoute precedence), the G items it becomes, and which servers have h2c."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ferryman.configs.render import Renderer
from ferryman.dataplane.main_file import MainFile, main_config
from ferryman.dataplane.server_version import h2c_from
from ferryman.dataplane.state_dir import Paths
from ferryman.engine.settings import GatewaySettings, NginxSettings, Settings
from ferryman.kinds.gateway.parse.gateway_api import Gateway, parse_gateway, parse_http_route
from ferryman.kinds.gateway.parse.grpc_route import GRPCMatch, GRPCRoute, parse_grpc_route
from ferryman.kinds.gateway.records.attach import Attachment, Route, attach, route_kind
from ferryman.kinds.gateway.records.routes import gateway_record
from ferryman.kinds.gateway.records.servers import render_hops, render_listens
from ferryman.resources.pcre import pcre_error

HTTP = {"name": "http", "port": 80, "protocol": "HTTP"}
SERVICES = {("gw", "one"), ("gw", "two")}
GRPC_ROUTE = ("gateway.networking.k8s.io", "GRPCRoute")
HTTP_ROUTE = ("gateway.networking.k8s.io", "HTTPRoute")

# The CRD's patterns for Exact names (hypothesis draws from them).
services = st.from_regex(r"\A\.?[a-zA-Z_][a-zA-Z_0-9]{0,8}(\.[a-zA-Z_][a-zA-Z_0-9]{0,8}){0,3}\Z")
methods = st.from_regex(r"\A[A-Za-z_][A-Za-z_0-9]{0,12}\Z")


def gateway(*listeners: dict[str, Any]) -> Gateway:
    spec = {"gatewayClassName": "ferryman", "listeners": list(listeners or [HTTP])}
    doc = {"metadata": {"name": "g", "namespace": "gw"}, "spec": spec}
    parsed = parse_gateway(doc)
    assert parsed.resource is not None, parsed.message()
    return parsed.resource


def grpc_doc(name: str, rules: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "gw", **spec.pop("meta", {})},
        "spec": {"parentRefs": [{"name": "g"}], "rules": rules, **spec},
    }


def grpc_route(name: str, rules: list[dict[str, Any]], **spec: Any) -> GRPCRoute:
    parsed = parse_grpc_route(grpc_doc(name, rules, **spec))
    assert parsed.resource is not None, parsed.message()
    return parsed.resource


def problems(rules: list[dict[str, Any]], **spec: Any) -> str:
    parsed = parse_grpc_route(grpc_doc("r", rules, **spec))
    assert parsed.resource is None
    return parsed.message()


def method_rule(backend: str = "one", **method: str) -> dict[str, Any]:
    return {"matches": [{"method": method}], "backendRefs": [{"name": backend, "port": 50051}]}


def run(routes: list[Route], h2c: bool = True, *listeners: dict[str, Any]) -> Attachment:
    return attach(
        [gateway(*listeners)], routes, (), lambda ns, n: "not found", lambda ns: {},
        lambda ns, n: (ns, n) in SERVICES, h2c=h2c,
    )  # fmt: skip


def accepted(att: Attachment, name: str) -> str:
    (parent,) = att.routes[("gw", name)]
    return next(c.reason for c in parent.conditions if c.type == "Accepted")


@given(services, methods)
def test_an_exact_service_and_method_is_the_exact_path(service: str, method: str) -> None:
    (match,) = grpc_route("r", [method_rule(service=service, method=method)]).rules[0].matches
    assert isinstance(match, GRPCMatch)
    assert (match.path_type, match.path) == ("Exact", f"/{service}/{method}")
    assert (match.service, match.grpc_method, match.method) == (service, method, None)


@given(services, methods, methods)
def test_a_service_alone_is_a_prefix_and_a_method_alone_a_pattern(
    service: str, method: str, other: str
) -> None:
    (by_service,) = grpc_route("r", [method_rule(service=service)]).rules[0].matches
    assert (by_service.path_type, by_service.path) == ("PathPrefix", f"/{service}")
    (by_method,) = grpc_route("r", [method_rule(method=method)]).rules[0].matches
    assert by_method.path_type == "RegularExpression"
    whole = re.compile(f"^(?:{by_method.path})$")
    assert whole.match(f"/{service}/{method}")
    assert bool(whole.match(f"/{service}/{other}")) == (other == method)
    assert not whole.match(f"/{method}")


@given(st.text(min_size=1, max_size=20))
def test_invalid_exact_names_are_refused(name: str) -> None:
    if not re.fullmatch(r"\.?[a-z_][a-z_0-9]*(\.[a-z_][a-z_0-9]*)*", name, re.IGNORECASE):
        assert "service must only contain valid characters" in problems([method_rule(service=name)])
    if not re.fullmatch(r"[A-Za-z_][A-Za-z_0-9]*", name):
        assert "method must only contain valid characters" in problems([method_rule(method=name)])


def test_the_crds_other_rules() -> None:
    assert "one or both of 'service' or 'method'" in problems([method_rule()])
    assert "must be a valid regular expression" in problems(
        [method_rule(type="RegularExpression", service="(")]
    )
    redirect = {"type": "RequestRedirect", "requestRedirect": {"statusCode": 301}}
    assert "must be one of" in problems([{"filters": [redirect]}])
    headers = [{"name": "v", "value": "1"}, {"name": "V", "value": "2"}]
    assert "Duplicate value" in problems([{"matches": [{"headers": headers}]}])
    assert "at most 16 items" in problems([{}] * 17)
    # No rules, no matches: every call (a rule without backends).
    (rule,) = grpc_route("r", []).rules
    assert [(m.path_type, m.path) for m in rule.matches] == [("PathPrefix", "/")]


def test_a_regular_expression_matches_the_whole_path() -> None:
    rule = method_rule(type="RegularExpression", service=r"a\.b.*", method="Ge.")
    (match,) = grpc_route("r", [rule]).rules[0].matches
    assert pcre_error(match.path) is None
    pattern = re.compile(f"^(?:{match.path})$")
    assert pattern.match("/a.bc/Get") and not pattern.match("/a.bc/Gets")
    assert not pattern.match("/xa.b/Get")


def test_listeners_take_grpc_routes_where_the_server_has_h2c() -> None:
    route = grpc_route("r", [method_rule(service="s", method="M")])
    att = run([route])
    (status,) = att.gateways[("gw", "g")].listeners
    assert set(status.supported_kinds) == {HTTP_ROUTE, GRPC_ROUTE}
    assert accepted(att, "r") == "Accepted" and status.attached_routes == 1
    # Debian's NGINX 1.22: HTTP/2 without TLS would end HTTP/1.1 on the socket.
    att = run([route], False)
    (status,) = att.gateways[("gw", "g")].listeners
    assert status.supported_kinds == (HTTP_ROUTE,)
    assert accepted(att, "r") == "NotAllowedByListeners"
    https = {"name": "https", "port": 443, "protocol": "HTTPS",
             "tls": {"certificateRefs": [{"name": "c"}]}}  # fmt: skip
    att = run([route], False, https)
    assert GRPC_ROUTE in att.gateways[("gw", "g")].listeners[0].supported_kinds


def test_an_http_route_and_a_grpc_route_never_share_a_hostname() -> None:
    """The older of the two takes the hostnames they share (grpcroute_types.go)."""
    old = {"creationTimestamp": "2026-01-01T00:00:00Z"}
    new = {"creationTimestamp": "2026-02-01T00:00:00Z"}
    spec = {"parentRefs": [{"name": "g"}], "hostnames": ["*.example.com"]}
    http_doc = {"metadata": {"name": "h", "namespace": "gw", **new}, "spec": spec}
    http = parse_http_route(http_doc).resource
    assert http is not None
    grpc = grpc_route("g1", [method_rule(service="s")], hostnames=["a.example.com"], meta=old)
    apart = grpc_route("g2", [method_rule(service="s")], hostnames=["a.example.org"], meta=new)
    att = run([http, grpc, apart])
    assert accepted(att, "g1") == "Accepted" and accepted(att, "g2") == "Accepted"
    assert accepted(att, "h") == "NotAllowedByListeners"
    table = att.table[("gw", "g", "http")]
    assert {e.route for entries in table.values() for e in entries} == {"grpc:gw/g1", "grpc:gw/g2"}
    assert route_kind("grpc:gw/g1") == ("GRPCRoute", "gw", "g1")
    assert route_kind("gw/h") == ("HTTPRoute", "gw", "h")


def test_precedence_service_then_method_then_headers() -> None:
    rules = [
        method_rule("one", method="Get"),
        method_rule("one", service="a.B"),
        method_rule("one", service="a.B", method="Get"),
        {"matches": [{"method": {"service": "a.B"}, "headers": [{"name": "x", "value": "1"}]}],
         "backendRefs": [{"name": "two", "port": 50051}]},
        {"backendRefs": [{"name": "two", "port": 50051}]},
    ]  # fmt: skip
    att = run([grpc_route("r", rules)])
    entries = att.table[("gw", "g", "http")][""]
    order = [(e.match.path, len(e.match.headers)) for e in entries]
    assert order == [
        ("/a.B/Get", 0),
        ("/a.B", 1),
        ("/a.B", 0),
        ("/[^/]+/Get", 0),
        ("/", 0),
    ]


def test_records_send_grpc_matches_to_the_grpc_location() -> None:
    rules = [method_rule("one", service="s", method="M"), method_rule("nowhere", service="t")]
    att = run([grpc_route("r", rules)])
    record, used = gateway_record(att.table[("gw", "g", "http")][""])
    items = record.split(" ")
    g_items = [i for i in items if i.startswith("G|")]
    assert len(g_items) == 2 and all(i.split("|")[5].endswith("g:") for i in g_items)
    # An invalid backend's calls: 503, which gRPC clients read as UNAVAILABLE.
    assert "t.503." in g_items[1] and "t.500." not in record
    assert len(used) == 1
    # An HTTPRoute's items have no "g".
    http = parse_http_route({"metadata": {"name": "h", "namespace": "gw"},
                             "spec": {"parentRefs": [{"name": "g"}]}}).resource  # fmt: skip
    assert http is not None
    record, _ = gateway_record(run([http]).table[("gw", "g", "http")][""])
    assert "g:" not in record


def test_which_servers_have_h2c_beside_http_1_1() -> None:
    assert not h2c_from("nginx version: nginx/1.22.1")
    assert not h2c_from("nginx version: nginx/1.25.0")
    assert h2c_from("nginx version: nginx/1.25.1")
    assert h2c_from("nginx version: nginx/1.30.4")
    assert h2c_from("nginx version: Angie/1.12.1")
    assert not h2c_from("something else")


def test_without_h2c_the_plaintext_sockets_are_the_stream_blocks() -> None:
    """Debian's 1.22: each plaintext socket is a stream server reading the
    preface ahead; the HTTP server keeps the TLS sockets only."""
    sockets = {("127.0.0.5", 80, False), ("*", 8080, False), ("127.0.0.5", 443, True)}
    direct = render_listens(sockets, ipv6=False)
    assert "127.0.0.5:80;" in direct and "127.0.0.5:443 ssl http2;" in direct
    hopped = render_listens(sockets, ipv6=False, hop=True)
    assert "127.0.0.5:443 ssl http2;" in hopped
    assert ":80;" not in hopped and "8080" not in hopped
    hops = render_hops(sockets, ipv6=True)
    assert hops.count("server {") == 2 and "443" not in hops
    assert "listen 127.0.0.5:80;" in hops and "listen [::]:8080 ipv6only=on;" in hops
    assert hops.count("ferryman_h2c_preread;") == 2
    assert hops.count("proxy_pass $ferryman_gateway_hop;") == 2
    assert hops.count("proxy_protocol on;") == 2


def _settings(tmp_path: Path, version: str, h2c_module: bool, module: bytes = b"") -> Settings:
    """Settings of a server whose ``-v`` prints ``version``, with the modules
    a Gateway needs (and the h2c module or not), ferryman's holding ``module``."""
    modules = tmp_path / "modules"
    modules.mkdir(parents=True)
    names = ["ngx_http_ferryman_module.so", "ngx_stream_module.so", "ngx_stream_ferryman_module.so"]
    for name in names + (["ngx_stream_ferryman_h2c_module.so"] if h2c_module else []):
        (modules / name).touch()
    (modules / "ngx_http_ferryman_module.so").write_bytes(module)
    binary = tmp_path / "server"
    binary.write_text(f"#!/bin/sh\necho 'nginx version: {version}' >&2\n")
    binary.chmod(0o755)
    return Settings(
        state_dir=tmp_path,
        gateway=GatewaySettings(enabled=True),
        nginx=NginxSettings(binary=str(binary), modules_dir=modules),
    )


def _server(
    tmp_path: Path, version: str, h2c_module: bool, user: str | None = None, module: bytes = b""
) -> str:
    """nginx.conf for ``_settings``'s server, its workers run as ``user``
    (None: ferryman's)."""
    settings = _settings(tmp_path, version, h2c_module, module)
    return Renderer().main(main_config(settings, Paths(tmp_path), user, public=True))


def test_nginx_conf_serves_h2c_as_each_server_can(tmp_path: Path) -> None:
    """``http2 on`` where the server tells h2c from HTTP/1.1 itself; else the
    stream block's hop, when the h2c module is there; else neither."""
    own = _server(tmp_path / "a", "nginx/1.30.4", h2c_module=True)
    assert "        http2 on;" in own and "gateway-h2c.sock" not in own
    assert "ngx_stream_ferryman_h2c_module.so" not in own
    old = _server(tmp_path / "b", "nginx/1.22.1", h2c_module=True)
    assert "http2 on;" not in old and "load_module" in old
    assert "ngx_stream_ferryman_h2c_module.so;" in old
    assert "gateway-h2c.sock http2 proxy_protocol;" in old
    assert "gateway-h1.sock proxy_protocol;" in old
    assert "map $ferryman_h2c $ferryman_gateway_hop" in old
    assert "set $ferryman_h_x_forwarded_port $ferryman_gateway_port;" in old
    neither = _server(tmp_path / "c", "nginx/1.22.1", h2c_module=False)
    assert "http2 on;" not in neither and "gateway-h2c.sock" not in neither
    # Workers as nobody that cannot reach the state dir's sockets: no hop.
    (tmp_path / "d").mkdir(mode=0o700)
    unreachable = _server(tmp_path / "d" / "e", "nginx/1.22.1", True, "nobody nogroup")
    assert "gateway-h2c.sock" not in unreachable
    # The gRPC location in the Gateway server, routed by the Gateway's router.
    assert own.count("location @ferryman_grpc {") == 2
    assert "ferryman.gateway_route()" in own.split("location @ferryman_grpc {")[2]


# A module with the preface detection (ngx_http_ferryman_h2c.c): its
# directive's name is a string in the .so.
DETECTING = b"\x7fELF...ferryman_gateway_route\0ferryman_h2c_detect\0"


def test_a_module_that_detects_h2c_takes_the_hops_place(tmp_path: Path) -> None:
    """Debian's 1.22 with a module that reads HTTP/2's preface itself: the
    Gateway server listens on the plaintext sockets directly (no stream
    server, no PROXY protocol), with ``ferryman_h2c_detect``, and its HTTP
    listeners still take GRPCRoutes. NGINX 1.30 keeps ``http2 on``."""
    conf = _server(tmp_path / "a", "nginx/1.22.1", h2c_module=True, module=DETECTING)
    gateway = conf.split("# Gateway API listeners")[1]
    assert "        ferryman_h2c_detect;" in gateway
    assert "http2 on;" not in conf and "gateway-h2c.sock" not in conf
    assert "ngx_stream_ferryman_h2c_module.so" not in conf
    assert "$ferryman_gateway_hop" not in conf and "$ferryman_gateway_port" not in conf
    assert "real_ip_header proxy_protocol;" not in gateway
    settings = _settings(tmp_path / "b", "nginx/1.22.1", h2c_module=True, module=DETECTING)
    assert MainFile(settings, Paths(tmp_path / "b")).h2c(None) == (True, False)
    hopping = _settings(tmp_path / "c", "nginx/1.22.1", h2c_module=True)
    assert MainFile(hopping, Paths(tmp_path / "c")).h2c(None) == (True, True)
    own = _server(tmp_path / "d", "nginx/1.30.4", h2c_module=False, module=DETECTING)
    assert "        http2 on;" in own and "ferryman_h2c_detect" not in own
