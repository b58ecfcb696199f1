"""``nginx.org/listen-ports`` and ``listen-ports-ssl`` (kinds/ingress/records/ports.py,
translators/listen_ports.py, configs/http_listeners.py) and
``nginx.org/use-cluster-ip`` (configs/endpoints.py): NIC's parsing, ports
refused with a warning, the H record's listeners, the files that open the
ports (and that they pass ``nginx -t``), and the ClusterIP endpoint set."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferryman.configs.endpoints import CLUSTER_IP, Peer, cluster_ip_peers
from ferryman.configs.http_listeners import (
    HTTP_LISTENERS_FILE,
    LISTENER_MAP_FILE,
    listener_files,
    render_listens,
    render_map,
)
from ferryman.configs.render import Renderer
from ferryman.engine.settings import ListenSettings
from ferryman.kinds.ingress.parse.annotations import validate
from ferryman.kinds.ingress.records.ports import (
    DEFAULT,
    MAX_PORT,
    Claim,
    Limits,
    Wanted,
    check,
    listeners,
    reserved_ports,
    wanted,
)
from ferryman.resources.global_configuration import Listener
from ferryman.resources.meta import ObjectRef
from ferryman.resources.service import parse_service
from ferryman.translators.listen_ports import ListenPorts
from testkit.controller_kit import Kit, _service
from testkit.harness import ingress, path, rule, tls_secret
from testkit.nginx_check import assert_nginx_t
from testkit.render import MAIN

LIMITS = Limits(
    80,
    443,
    reserved_ports(
        {8081: "--ready-port", 9113: "--metrics-port", 8080: "--nginx-status-port"},
        [("dns-tcp", 5353)],
    ),
)


def test_nics_parsing_and_messages() -> None:
    """NIC's ParsePortList (strconv.ParseInt base 10, 32 bits, > 0) and its
    validation message; hostless Ingresses may not have them."""
    assert wanted({"nginx.org/listen-ports": "8080,+9090,8080"}) == Wanted((8080, 9090), None)
    assert wanted({"nginx.org/listen-ports-ssl": "8443"}) == Wanted(None, (8443,))
    _, problems, _ = validate({"nginx.org/listen-ports": ""}, frozenset(), hostless=False)
    assert [p.kind for p in problems] == ["Required value"]
    for bad in ("0", "-1", "80,", "8o", " 80", str(1 << 31)):
        _, problems, _ = validate({"nginx.org/listen-ports": bad}, frozenset(), hostless=False)
        assert [(p.kind, p.detail) for p in problems] == [
            ("Invalid value", "must be a comma-separated list of port numbers")
        ], bad
    _, problems, _ = validate({"nginx.org/listen-ports-ssl": "8443"}, frozenset(), hostless=True)
    assert [p.detail for p in problems] == ["annotation is not supported for hostless Ingress"]


def test_refused_ports_warn_one_each() -> None:
    want = Wanted((80, 8080, 9113, 5353, 443, 70000, 9000), (443, 9000, 8443, 80))
    claim, warnings = check(want, LIMITS)
    assert claim == Claim(frozenset({9000}), frozenset({8443}))
    assert warnings == [
        "nginx.org/listen-ports: port 8080 is ferryman's --nginx-status-port; "
        "the host is not served on it",
        "nginx.org/listen-ports: port 9113 is ferryman's --metrics-port; "
        "the host is not served on it",
        "nginx.org/listen-ports: port 5353 is GlobalConfiguration listener dns-tcp's; "
        "the host is not served on it",
        "nginx.org/listen-ports: port 443 is ferryman's --https-port (TLS); "
        "the host is not served on it",
        "nginx.org/listen-ports: port 70000 is above 65535; the host is not served on it",
        "nginx.org/listen-ports-ssl: port 80 is ferryman's --http-port (plain HTTP); "
        "the host is not served on it",
        "nginx.org/listen-ports-ssl: port 9000 is in nginx.org/listen-ports too; "
        "the host is not served on it",
    ]
    # The H record: the default port as "0", the granted ones in the order asked.
    assert listeners(want, claim.plain, claim.ssl, LIMITS) == ("0,9000", "0,8443")


def test_listener_names() -> None:
    assert listeners(Wanted(), (), (), LIMITS) is None
    assert listeners(Wanted((9000,), None), {9000}, (), LIMITS) == ("9000", DEFAULT)
    assert listeners(Wanted(None, (8443,)), (), {8443}, LIMITS) == (DEFAULT, "8443")
    # Nothing granted: served on no port of that scheme ("" is "-" in the record).
    assert listeners(Wanted((70000,), None), (), (), LIMITS) == ("", DEFAULT)


ports = st.integers(min_value=1, max_value=(1 << 31) - 1) | st.sampled_from(
    [80, 443, 8080, 8081, 9113, 5353, 9000, 65535, 65536]
)
port_lists = st.none() | st.lists(ports, min_size=1, max_size=6).map(
    lambda ps: tuple(dict.fromkeys(ps))
)


@given(port_lists, port_lists)
def test_what_is_claimed_can_always_be_opened(
    plain: tuple[int, ...] | None, ssl: tuple[int, ...] | None
) -> None:
    """Whatever is asked, a claimed port is a valid port held by nothing else,
    in one scheme only; every listener name is a granted port or the default."""
    want = Wanted(plain, ssl)
    claim, warnings = check(want, LIMITS)
    taken = {80, 443, *LIMITS.reserved}
    for port in claim.plain | claim.ssl:
        assert 0 < port <= MAX_PORT and port not in taken
    assert not claim.plain & claim.ssl
    asked = [p for p in (plain or ()) if p != 80] + [p for p in (ssl or ()) if p != 443]
    assert len(warnings) == len(asked) - len(claim.plain) - len(claim.ssl)
    names = listeners(want, claim.plain, claim.ssl, LIMITS)
    if plain is None and ssl is None:
        assert names is None
        return
    assert names is not None
    for field, granted in zip(names, (claim.plain, claim.ssl), strict=True):
        for name in filter(None, field.split(",")):
            assert name == DEFAULT or int(name) in granted


def _ref(name: str) -> ObjectRef:
    return ObjectRef("Ingress", "default", name)


def _age(ts: str, name: str) -> tuple[bool, str, str, str, str]:
    return (False, ts, "default", name, "Ingress")


def test_the_oldest_claimant_sets_a_ports_scheme() -> None:
    files: dict[str, str] = {}
    registry = ListenPorts(files)
    assert registry.claim(_ref("new"), _age("2021", "new"), Claim(frozenset({9000}))) == set()
    assert registry.grant(_ref("new")).plain == {9000}
    # An older Ingress takes 9000 for TLS: the newer one loses it (and is named).
    changed = registry.claim(_ref("old"), _age("2020", "old"), Claim(ssl=frozenset({9000})))
    assert changed == {_ref("new")}
    assert registry.grant(_ref("new")).plain == set()
    assert registry.grant(_ref("new")).taken == ((9000, False, "default/old"),)
    assert "listen 9000 ssl reuseport;" in files[HTTP_LISTENERS_FILE]
    assert registry.release(_ref("old")) == {_ref("new")}
    assert registry.grant(_ref("new")).plain == {9000}
    assert files[HTTP_LISTENERS_FILE].splitlines()[1:] == [
        "listen 9000 reuseport;",
        "listen [::]:9000 reuseport ipv6only=on;",
    ]
    assert "    9000 9000;" in files[LISTENER_MAP_FILE]
    assert registry.release(_ref("nobody")) == set()


def test_disable_ipv6_listens_on_ipv4_only() -> None:
    files: dict[str, str] = {}
    ListenPorts(files, ipv6=False).claim(_ref("a"), _age("2020", "a"), Claim(frozenset({9000})))
    assert files[HTTP_LISTENERS_FILE].splitlines()[1:] == ["listen 9000 reuseport;"]


def test_no_file_until_a_port_is_asked_for() -> None:
    """Without extra ports nginx.conf's glob includes nothing: no reload for them."""
    files: dict[str, str] = {}
    registry = ListenPorts(files)
    registry.claim(_ref("a"), _age("2020", "a"), Claim())
    assert files == {}


def test_a_global_configuration_listener_keeps_its_port() -> None:
    listeners_ = (Listener("http-8083", 8083, "HTTP"), Listener("dns", 5353, "UDP"))
    ports_ = {8083: True, 5353: False, 9000: False}
    assert render_listens(listeners_, ports_, ipv6=False).splitlines()[1:] == [
        "listen 8083 reuseport;",
        "listen 9000 reuseport;",
    ]
    assert render_listens(listeners_, ports_).splitlines()[1:] == [
        "listen 8083 reuseport;",
        "listen [::]:8083 reuseport ipv6only=on;",
        "listen 9000 reuseport;",
        "listen [::]:9000 reuseport ipv6only=on;",
    ]
    assert render_map(listeners_, ports_).splitlines()[3:-1] == [
        "    8083 http-8083;",
        "    9000 9000;",
    ]


def test_the_files_pass_nginx_t(tmp_path: Path) -> None:
    """nginx.conf with GlobalConfiguration listeners and Ingress ports of both
    schemes loads (with $FERRYMAN_TEST_NGINX_MODULES_DIR, that module)."""
    main = Renderer().main(dataclasses.replace(MAIN, http_listeners=True))
    gc = (Listener("http-8083", 18083, "HTTP"), Listener("tls", 18444, "HTTP", ssl=True))
    assert_nginx_t(tmp_path, main, listener_files(gc, {18083: False, 19000: False, 19443: True}))


def _ing(name: str, host: str, annotations: dict[str, str], created: str) -> dict[str, Any]:
    return ingress(name, [rule(host, path("/", "app"))], annotations=annotations, created=created)


def test_the_controller_names_the_ports_in_the_h_record(tmp_path: Path) -> None:
    kit = Kit(tmp_path, listen=ListenSettings(http_port=80, https_port=443))
    kit.add(*_service("app", "10.0.0.1"))
    kit.add(_ing("b", "b.test", {"nginx.org/listen-ports": "9000,80"}, "2021-01-01T00:00:00Z"))
    asyncio.run(kit.drain())
    assert kit.dataplane.records[("H", "b.test")] == "- 0:9000,0:0 - rr:1:10 P|/|default/app:80"
    assert "listen 9000 reuseport;" in kit.dataplane.files[HTTP_LISTENERS_FILE]
    assert kit.reasons("b")[-1] == "AddedOrUpdated"
    # An older Ingress takes 9000 for TLS: b is rendered again without it.
    old = _ing("a", "a.test", {"nginx.org/listen-ports-ssl": "9000"}, "2020-01-01T00:00:00Z")
    old["spec"]["tls"] = [{"hosts": ["a.test"], "secretName": "tls"}]
    kit.add(tls_secret("tls", ["a.test"]), old)
    asyncio.run(kit.drain())
    assert kit.dataplane.records[("H", "a.test")].split(" ")[1] == "1:0:9000"
    assert kit.dataplane.records[("H", "b.test")].startswith("- 0:0:0 ")
    assert kit.messages("b")[-1].endswith(
        "nginx.org/listen-ports: port 9000 is served with TLS for Ingress default/a; "
        "the host is not served on it"
    )
    assert "listen 9000 ssl reuseport;" in kit.dataplane.files[HTTP_LISTENERS_FILE]
    kit.sink.delete(ObjectRef("Ingress", "default", "a"))
    asyncio.run(kit.drain())
    assert kit.dataplane.records[("H", "b.test")].startswith("- 0:9000,0:0 ")
    assert kit.reasons("b")[-1] == "AddedOrUpdated"


# ---- use-cluster-ip ----------------------------------------------------------------


def _svc(spec: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "Service", "metadata": {"name": "app", "namespace": "default"}, "spec": spec}


@pytest.mark.parametrize(
    ("spec", "peers"),
    [
        ({"clusterIP": "10.96.0.5", "ports": [{"port": 80, "name": "http"}]}, [("10.96.0.5", 80)]),
        ({"clusterIP": "fd00::5", "ports": [{"port": 80}]}, [("fd00::5", 80)]),
        ({"clusterIP": "None", "ports": [{"port": 80}]}, []),  # headless
        ({"clusterIP": "10.96.0.5", "type": "ExternalName", "ports": [{"port": 80}]}, []),
        ({"clusterIP": "10.96.0.5 ; x", "ports": [{"port": 80}]}, []),
        ({"clusterIP": "10.96.0.5", "ports": [{"port": 81}]}, []),  # no such port
    ],
)
def test_cluster_ip_peers(spec: dict[str, Any], peers: list[tuple[str, int]]) -> None:
    service = parse_service(_svc(spec))
    assert list(cluster_ip_peers(service, 80)) == [Peer(a, p) for a, p in peers]
    if peers:  # a port named in the Ingress resolves among the Service's ports
        named = spec["ports"][0].get("name")
        assert not named or cluster_ip_peers(service, named) == cluster_ip_peers(service, 80)


def test_use_cluster_ip_is_an_endpoint_set(tmp_path: Path) -> None:
    """The backend key names the ClusterIP set; another Ingress of the same
    Service keeps its endpoints; the ClusterIP moving is a record change."""
    kit = Kit(tmp_path)
    service, slice_ = _service("app", "10.0.0.1")
    service["spec"]["clusterIP"] = "10.96.0.5"
    kit.add(service, slice_)
    kit.add(_ing("cip", "cip.test", {"nginx.org/use-cluster-ip": "true"}, "2020-01-01T00:00:00Z"))
    kit.add(_ing("ep", "ep.test", {}, "2020-01-01T00:00:00Z"))
    asyncio.run(kit.drain())
    key = "default/app:80" + CLUSTER_IP
    assert kit.dataplane.records[("H", "cip.test")] == f"- 0 - rr:1:10 P|/|{key}"
    assert kit.dataplane.records[("E", key)] == "10.96.0.5#80"
    assert kit.dataplane.records[("E", "default/app:80")] == "10.0.0.1#8080"
    assert kit.reasons("cip")[-1] == "AddedOrUpdated"
    service["spec"]["clusterIP"] = "10.96.0.6"
    kit.add(service)
    asyncio.run(kit.drain())
    assert kit.dataplane.records[("E", key)] == "10.96.0.6#80"
    assert kit.dataplane.reloads == 0  # records only


def test_tls_ports_need_a_tls_host(tmp_path: Path) -> None:
    """NIC writes the TLS listens only for a server with TLS: without a tls
    entry listen-ports-ssl opens nothing (a Warning says so)."""
    kit = Kit(tmp_path, listen=ListenSettings(http_port=80, https_port=443))
    kit.add(*_service("app", "10.0.0.1"))
    kit.add(_ing("a", "a.test", {"nginx.org/listen-ports-ssl": "9443"}, "2020-01-01T00:00:00Z"))
    asyncio.run(kit.drain())
    assert kit.dataplane.records[("H", "a.test")] == "- 0 - rr:1:10 P|/|default/app:80"
    assert HTTP_LISTENERS_FILE not in kit.dataplane.files
    assert kit.messages("a")[-1].endswith(
        "nginx.org/listen-ports-ssl: the Ingress has no TLS host; ignored"
    )
