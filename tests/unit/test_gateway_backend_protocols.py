"""HTTPRoute backends whose Service port's appProtocol is kubernetes.io/h2c
(GEP-1911): which backends are marked, the ``h`` filter of their G items, and
the Gateway server's @ferryman_h2c location (grpc_pass without the gRPC
status mapping of NGINX's own errors)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ferryman.configs.render import Renderer
from ferryman.dataplane.main_file import main_config
from ferryman.dataplane.state_dir import Paths
from ferryman.engine.settings import GatewaySettings, NginxSettings, Settings
from ferryman.kinds.gateway.parse.gateway_api import (
    Gateway,
    HTTPRoute,
    parse_gateway,
    parse_http_route,
)
from ferryman.kinds.gateway.parse.grpc_route import parse_grpc_route
from ferryman.kinds.gateway.records.attach import Attachment, Route, attach
from ferryman.kinds.gateway.records.backend_protocols import H2C, app_protocol, mark_h2c
from ferryman.kinds.gateway.records.routes import gateway_record
from ferryman.wire.records import Record
from ferryman.wire.route_table import rows

LISTENER = ("gw", "g", "http")


def service(*ports: tuple[int, str | None]) -> dict[str, Any]:
    return {
        "spec": {
            "ports": [
                {"port": p, **({"appProtocol": proto} if proto else {})} for p, proto in ports
            ]
        }
    }


SERVICES: dict[tuple[str, str], dict[str, Any]] = {
    ("gw", "echo"): service((8080, None), (8081, H2C), (8082, "kubernetes.io/ws")),
    ("gw", "h2"): service((80, H2C)),
}


def gateway() -> Gateway:
    spec = {"gatewayClassName": "ferryman", "listeners": [{"name": "http", "port": 80,
                                                           "protocol": "HTTP"}]}  # fmt: skip
    parsed = parse_gateway({"metadata": {"name": "g", "namespace": "gw"}, "spec": spec})
    assert parsed.resource is not None
    return parsed.resource


def http_route(name: str, *backends: tuple[str, int, int]) -> HTTPRoute:
    refs = [{"name": n, "port": p, "weight": w} for n, p, w in backends]
    doc = {"metadata": {"name": name, "namespace": "gw"},
           "spec": {"parentRefs": [{"name": "g"}], "rules": [{"backendRefs": refs}]}}  # fmt: skip
    parsed = parse_http_route(doc)
    assert parsed.resource is not None, parsed.message()
    return parsed.resource


def run(*routes: Route) -> Attachment:
    att = attach(
        [gateway()], routes, (), lambda ns, n: "not found", lambda ns: {},
        lambda ns, n: (ns, n) in SERVICES,
    )  # fmt: skip
    mark_h2c(att.table, lambda ns, n: SERVICES.get((ns, n)))
    return att


def g_item(att: Attachment) -> str:
    record, _ = gateway_record(att.table[LISTENER][""])
    (item,) = [i for i in record.split(" ") if i.startswith("G|")]
    return item


def test_a_service_ports_app_protocol() -> None:
    echo = SERVICES[("gw", "echo")]
    assert app_protocol(echo, 8081) == H2C
    assert app_protocol(echo, 8082) == "kubernetes.io/ws"
    assert app_protocol(echo, 8080) is None
    assert app_protocol(echo, 9999) is None
    assert app_protocol(None, 80) is None
    assert app_protocol({"spec": {"ports": "nonsense"}}, 80) is None
    assert app_protocol({"spec": {"ports": [{"port": 80, "appProtocol": 7}]}}, 80) is None


def test_an_h2c_backend_marks_its_split() -> None:
    att = run(http_route("r", ("echo", 8081, 1)))
    (entry,) = att.table[LISTENER][""]
    assert entry.h2c == (True,)
    assert g_item(att).split("|")[5] == "h:1"


def test_other_protocols_stay_http_1_1() -> None:
    """No appProtocol, kubernetes.io/ws (HTTP/1.1's Upgrade), an unknown
    Service: no mark, the record as before."""
    for port in (8080, 8082):
        att = run(http_route("r", ("echo", port, 1)))
        (entry,) = att.table[LISTENER][""]
        assert entry.h2c == ()
        assert "h:" not in g_item(att)
    att = run(http_route("r", ("missing", 8081, 1)))
    assert att.table[LISTENER][""][0].h2c == ()
    assert "t.500." in g_item(att)


def test_mixed_backends_mark_the_h2c_splits_only() -> None:
    """Splits are numbered as the record writes them (weight 0 and invalid
    backends: none, or an answer), so the router picks again among the
    marked ones in @ferryman_h2c."""
    att = run(
        http_route(
            "r", ("echo", 8080, 1), ("h2", 80, 0), ("missing", 80, 2), ("echo", 8081, 3),
            ("h2", 80, 4),
        )
    )  # fmt: skip
    fields = g_item(att).split("|")
    splits = fields[4].split(",")
    assert [s.split(":")[0] for s in splits] == ["1", "2", "3", "4"]
    assert splits[1].startswith("2:t.500.")
    assert fields[5] == "h:3^4"


def test_grpc_routes_are_not_marked() -> None:
    """A GRPCRoute's backends are HTTP/2 anyway (its "g" filter)."""
    doc = {"metadata": {"name": "c", "namespace": "gw"},
           "spec": {"parentRefs": [{"name": "g"}],
                    "rules": [{"backendRefs": [{"name": "h2", "port": 80}]}]}}  # fmt: skip
    grpc = parse_grpc_route(doc).resource
    assert grpc is not None
    item = g_item(run(grpc))
    assert item.endswith("g:") and "h:" not in item


def test_each_service_is_read_once() -> None:
    reads: list[tuple[str, str]] = []

    def get(ns: str, name: str) -> dict[str, Any] | None:
        reads.append((ns, name))
        return SERVICES.get((ns, name))

    att = attach(
        [gateway()], [http_route("a", ("echo", 8081, 1)), http_route("b", ("echo", 8081, 1))],
        (), lambda ns, n: "not found", lambda ns: {}, lambda ns, n: True,
    )  # fmt: skip
    mark_h2c(att.table, get)
    assert reads == [("gw", "echo")]


def test_the_gateway_server_has_an_h2c_location(tmp_path: Path) -> None:
    """@ferryman_h2c: grpc_pass to the gRPC pools, routed by the Gateway's
    router; NGINX's own errors stay HTTP statuses (no gRPC mapping)."""
    modules = tmp_path / "modules"
    modules.mkdir()
    for name in ("ngx_http_ferryman_module.so", "ngx_stream_module.so",
                 "ngx_stream_ferryman_module.so"):  # fmt: skip
        (modules / name).touch()
    binary = tmp_path / "server"
    binary.write_text("#!/bin/sh\necho 'nginx version: nginx/1.30.4' >&2\n")
    binary.chmod(0o755)
    settings = Settings(
        state_dir=tmp_path,
        gateway=GatewaySettings(enabled=True),
        nginx=NginxSettings(binary=str(binary), modules_dir=modules),
    )
    conf = Renderer().main(main_config(settings, Paths(tmp_path), None, public=True))
    assert conf.count("location @ferryman_h2c {") == 1
    h2c = conf.split("location @ferryman_h2c {")[1].split("\n        }\n")[0]
    assert 'set $ferryman_variant "h2c";' in h2c
    assert "ferryman.gateway_route()" in h2c
    assert "grpc_pass $ferryman_upstream_target;" in h2c
    assert "set $ferryman_upstream_target grpc://ferryman_grpc;" in h2c
    assert "error_page" not in h2c
    assert 'grpc_set_header Proxy-Connection "";' in h2c
    # With a rule's RequestMirror copies, as @ferryman_mirror_<n> sends them.
    for n in (1, 2, 3):
        head = f"location @ferryman_h2c_mirror_{n} {{"
        assert conf.count(head) == 1
        mirrored = conf.split(head)[1].split("\n        }\n")[0]
        assert mirrored.count("mirror /_ferryman/mirror/") == n
        assert f"mirror /_ferryman/mirror/{n};" in mirrored
        assert 'set $ferryman_variant "h2c";' in mirrored and "error_page" not in mirrored
    assert "location @ferryman_h2c_mirror_4" not in conf
    # The gRPC locations keep their mapping, and exist once each.
    assert conf.count("location @ferryman_grpc_unavailable {") == 2
    grpc = conf.split("location @ferryman_grpc {")[2].split("\n        }\n")[0]
    assert "error_page 429 502 503 504 = @ferryman_grpc_unavailable;" in grpc


def test_the_route_table_shows_the_h2c_splits() -> None:
    att = run(http_route("r", ("echo", 8080, 1), ("echo", 8081, 3)))
    record, _ = gateway_record(att.table[LISTENER][""])
    found = rows({(Record.GATEWAY, "127.0.0.100:80/_"): f"- 0 {record}"}, lambda k: None)
    assert [(r.match, r.action) for r in found] == [
        ("PathPrefix,weight=1/4", "proxy"),
        ("PathPrefix,weight=3/4", "proxy:h2c"),
    ]
