"""Who a port is refused to (translators/listen_ports.py) and how a failed
reload names the port NGINX could not bind (dataplane/nginx_messages.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ferryman.configs.http_listeners import HTTP_LISTENERS_FILE, Claim
from ferryman.dataplane.nginx_messages import bind_failure, master_failure
from ferryman.engine.configuration import AgeKey
from ferryman.resources.global_configuration import parse_global_configuration
from ferryman.resources.meta import ObjectRef
from ferryman.translators.listen_ports import ListenPorts

BIND = (
    "2026/11/28 08:00:00 [emerg] 42#42: bind() to 0.0.0.0:{port} failed "
    "(98: Address already in use)"
)


def _age(name: str, year: int) -> AgeKey:
    return (False, f"{year}-01-01T00:00:00Z", "default", name, "Ingress")


def _ref(name: str) -> ObjectRef:
    return ObjectRef("Ingress", "default", name)


def test_the_port_a_master_could_not_bind_is_named() -> None:
    assert bind_failure(BIND.format(port=8080), 42) == (8080, "Address already in use")
    assert bind_failure(BIND.format(port=8080), 7) is None  # another master's (the test's)
    assert not master_failure(BIND.format(port=8080), 42)  # retried by NGINX itself
    v6 = "[emerg] 42#42: bind() to [::]:9000 failed (13: Permission denied)"
    assert bind_failure(v6, 42) == (9000, "Permission denied")
    assert bind_failure("[emerg] 42#42: still could not bind()", 42) is None


@given(st.integers(1, 65535))
def test_any_port_is_read_back(port: int) -> None:
    assert bind_failure(BIND.format(port=port), 42) == (port, "Address already in use")


def test_an_unbindable_port_is_refused_until_nobody_asks() -> None:
    files: dict[str, str] = {}
    ports = ListenPorts(files)
    ports.claim(_ref("a"), _age("a", 2020), Claim(frozenset({9001, 9002})))
    changed, dropped = ports.block({9001: "Address already in use", 5555: "x"})
    assert (changed, dropped) == ({_ref("a")}, {9001})  # nobody asked for 5555
    grant = ports.grant(_ref("a"))
    assert grant.plain == {9002}
    assert grant.refused == ((9001, False, "cannot be bound: Address already in use"),)
    assert "9001" not in files[HTTP_LISTENERS_FILE]
    # Still asked for: still refused (the same files would fail again).
    ports.claim(_ref("a"), _age("a", 2020), Claim(frozenset({9001})))
    assert ports.grant(_ref("a")).plain == frozenset()
    # Nobody asks any more: asked again, it is tried again.
    ports.release(_ref("a"))
    ports.claim(_ref("b"), _age("b", 2021), Claim(frozenset({9001})))
    assert ports.grant(_ref("b")).plain == {9001}


def test_a_port_a_gateway_keeps_is_refused_to_ingresses() -> None:
    ports = ListenPorts({})
    told: list[int] = []
    ports.on_owners_changed = lambda: told.append(1)
    ports.claim(_ref("a"), _age("a", 2021), Claim(frozenset({9001})))
    assert told and ports.oldest(9001) == (_age("a", 2021), _ref("a"))
    changed = ports.set_gateway_ports(
        {9001: "is Gateway default/gw's listener http's port"}, {9001}
    )
    assert changed == {_ref("a")}
    assert ports.grant(_ref("a")).refused == (
        (9001, False, "is Gateway default/gw's listener http's port"),
    )
    assert ports.set_gateway_ports({}, ()) == {_ref("a")}
    assert ports.grant(_ref("a")).plain == {9001}


def test_a_global_configuration_leaves_out_listeners_on_ports_it_cannot_have() -> None:
    """An older Gateway's port is refused to TCP and HTTP listeners (UDP is
    another socket); a port NGINX could not bind to every listener."""
    listeners = [
        {"name": "tcp", "port": 9000, "protocol": "TCP"},
        {"name": "udp", "port": 9000, "protocol": "UDP"},
        {"name": "busy", "port": 9001, "protocol": "UDP"},
        {"name": "ok", "port": 9002, "protocol": "HTTP"},
    ]
    obj = {"metadata": {"name": "gc", "namespace": "default"}, "spec": {"listeners": listeners}}
    parsed = parse_global_configuration(
        obj,
        held={9000: "is Gateway default/gw's listener http's port"},
        unbindable={9001: "cannot be bound: Address already in use"},
    )
    assert parsed.resource is not None
    assert [lst.name for lst in parsed.resource.listeners] == ["udp", "ok"]
    message = parsed.message()
    assert "Listener tcp: port 9000 is Gateway default/gw's listener http's port" in message
    assert "Listener busy: port 9001 cannot be bound: Address already in use" in message


_PORTS = st.integers(9000, 9006)


@given(
    claims=st.lists(
        st.tuples(st.frozensets(_PORTS, max_size=3), st.frozensets(_PORTS, max_size=3)),
        max_size=5,
    ),
    gateway=st.frozensets(_PORTS, max_size=3),
    busy=st.frozensets(_PORTS, max_size=2),
)
def test_a_refused_port_is_never_granted_nor_opened(
    claims: list[tuple[frozenset[int], frozenset[int]]],
    gateway: frozenset[int],
    busy: frozenset[int],
) -> None:
    """Whatever the order: a port a Gateway keeps or NGINX could not bind is
    no Ingress's, the file never opens it, and each port opened has one scheme."""
    files: dict[str, str] = {}
    ports = ListenPorts(files)
    for i, (plain, ssl) in enumerate(claims):
        ports.claim(_ref(f"i{i}"), _age(f"i{i}", 2000 + i), Claim(plain, ssl - plain))
    ports.set_gateway_ports(dict.fromkeys(gateway, "is a Gateway's"), gateway)
    ports.block(dict.fromkeys(busy, "Address already in use"))
    blocked = gateway | {p for p in busy if ports.oldest(p) is not None or p in gateway}
    opened: dict[int, bool] = {}
    for i in range(len(claims)):
        grant = ports.grant(_ref(f"i{i}"))
        assert not (grant.plain | grant.ssl) & blocked
        for port in grant.plain:
            assert opened.setdefault(port, False) is False
        for port in grant.ssl:
            assert opened.setdefault(port, True) is True
    listens = files.get(HTTP_LISTENERS_FILE, "")
    for port in blocked:
        assert f"listen {port}" not in listens
