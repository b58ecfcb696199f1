"""GlobalConfiguration and TransportServer parsing: NIC's rules and messages, the
records and stream.conf they become, and the CRDs' fields."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferryman import kinds
from ferryman.kinds.transport.parse.transportserver import TransportServer, parse_transport_server
from ferryman.kinds.transport.records.stream import (
    render_stream,
    stream_record,
    stream_server,
)
from ferryman.resources.global_configuration import Listener, parse_global_configuration
from ferryman.resources.nic_fields import Context
from testkit.nic_fixtures import nic_examples


def gc(*listeners: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "GlobalConfiguration",
        "metadata": {"name": "gc", "namespace": "nginx-ingress"},
        "spec": {"listeners": list(listeners)},
    }


def ts(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "listener": {"name": "dns-tcp", "protocol": "TCP"},
        "upstreams": [{"name": "app", "service": "coredns", "port": 5353}],
        "action": {"pass": "app"},
    }
    return {
        "kind": "TransportServer",
        "metadata": {"name": "t", "namespace": "default"},
        "spec": {**base, **spec},
    }


def valid(obj: dict[str, Any], *, passthrough: bool = True) -> TransportServer:
    parsed = parse_transport_server(obj, tls_passthrough=passthrough)
    assert parsed.resource is not None, parsed.message()
    return parsed.resource


def problems(obj: dict[str, Any], *, passthrough: bool = True) -> str:
    parsed = parse_transport_server(obj, tls_passthrough=passthrough)
    assert parsed.resource is None
    return parsed.message()


# ---- GlobalConfiguration ------------------------------------------------------------


LABEL = st.from_regex(r"[a-z]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True)


@given(
    names=st.lists(LABEL.filter(lambda n: n != "tls-passthrough"), min_size=1, max_size=6),
    ports=st.lists(st.integers(1, 65535), min_size=6, max_size=6),
    protocols=st.lists(st.sampled_from(["TCP", "UDP", "HTTP"]), min_size=6, max_size=6),
)
def test_listeners_kept_are_unique_and_free_of_clashes(
    names: list[str], ports: list[int], protocols: list[str]
) -> None:
    """Whatever the listeners, those kept have distinct names, no TCP/HTTP pair shares
    a port, no two UDP share one, and each left out is reported."""
    listeners = [
        {"name": n, "port": p, "protocol": proto}
        for n, p, proto in zip(names, ports, protocols, strict=False)
    ]
    parsed = parse_global_configuration(gc(*listeners))
    assert parsed.resource is not None
    kept = parsed.resource.listeners
    assert len({listener.name for listener in kept}) == len(kept)
    stream = [(lis.port, lis.protocol == "UDP") for lis in kept]
    assert len(set(stream)) == len(stream)
    assert len(kept) + len(parsed.problems) == len(listeners)


@given(port=st.one_of(st.integers(max_value=0), st.integers(min_value=65536)))
def test_listener_ports_out_of_range_are_refused(port: int) -> None:
    parsed = parse_global_configuration(gc({"name": "a", "port": port, "protocol": "TCP"}))
    assert parsed.resource is not None and parsed.resource.listeners == ()
    assert parsed.message() == (
        f"spec.listeners[0].port: Invalid value: {port}: must be between 1 and 65535, inclusive"
    )


@given(name=st.text(max_size=30).filter(lambda n: not LABEL_RE_FULL(n)))
def test_listener_names_that_are_not_dns1035_labels_are_refused(name: str) -> None:
    parsed = parse_global_configuration(gc({"name": name, "port": 5353, "protocol": "TCP"}))
    assert parsed.resource is not None and parsed.resource.listeners == ()
    assert parsed.problems[0].field == "spec.listeners[0].name"


def LABEL_RE_FULL(name: str) -> bool:
    import re

    return re.fullmatch(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?", name) is not None and (
        name != "tls-passthrough"
    )


def test_nics_messages_for_bad_listeners() -> None:
    parsed = parse_global_configuration(
        gc(
            {"name": "dns-udp", "port": 5353, "protocol": "UDP"},
            {"name": "dns-tcp", "port": 5353, "protocol": "TCP"},
            {"name": "web", "port": 5353, "protocol": "HTTP"},
            {"name": "tls-passthrough", "port": 443, "protocol": "TCP"},
            {"name": "v4", "port": 1, "protocol": "TCP", "ipv4": "::1"},
            {"name": "gone", "port": 80, "protocol": "TCP"},
        ),
        forbidden_ports=frozenset({80}),
    )
    assert parsed.resource is not None
    assert [lis.name for lis in parsed.resource.listeners] == ["dns-udp", "dns-tcp"]
    assert parsed.message() == (
        '[spec.listeners.protocol: Invalid value: "HTTP": Listener web: Duplicated ip:port '
        "protocol combination 0.0.0.0:5353 HTTP, "
        "spec.listeners[3].name: Forbidden: is the name of a built-in listener, "
        'spec.listeners[4].ipv4: Invalid value: "::1": must be a valid IPv4 address, '
        "spec.listeners[5].port: Forbidden: Listener gone: port 80 is forbidden]"
    )


def test_an_ipv6_zone_never_reaches_the_listen_directive() -> None:
    parsed = parse_global_configuration(
        gc({"name": "a", "port": 1, "protocol": "TCP", "ipv6": "fe80::1%eth0;}"})
    )
    assert parsed.resource is not None and parsed.resource.listeners == ()
    assert parsed.message() == (
        'spec.listeners[0].ipv6: Invalid value: "fe80::1%eth0;}": must be a valid IPv6 address'
    )


def test_listeners_on_other_addresses_do_not_clash() -> None:
    parsed = parse_global_configuration(
        gc(
            {"name": "a", "port": 7000, "protocol": "TCP", "ipv4": "127.0.0.1", "ipv6": "::1"},
            {"name": "b", "port": 7000, "protocol": "TCP", "ipv4": "127.0.0.2", "ipv6": "::2"},
        )
    )
    assert parsed.resource is not None and len(parsed.resource.listeners) == 2


# ---- TransportServer ----------------------------------------------------------------


def test_defaults_are_nics() -> None:
    t = valid(ts())
    assert (t.connect_timeout_ms, t.session_timeout_ms, t.next_upstream) == (60_000, 600_000, False)
    up = t.upstream
    assert (up.lb_method, up.max_fails, up.fail_timeout_ms, up.max_conns) == (
        "random two least_conn",
        1,
        10_000,
        0,
    )
    assert stream_record(t) == "default/coredns:5353 random2lc 1 10000 0 0 0 0"


def test_the_record_carries_what_the_balancer_decides() -> None:
    t = valid(
        ts(
            upstreams=[
                {
                    "name": "app",
                    "service": "coredns",
                    "port": 5353,
                    "loadBalancingMethod": "least_conn",
                    "maxFails": 3,
                    "failTimeout": "30s",
                    "maxConns": 100,
                    "backup": "spare",
                    "backupPort": 53,
                }
            ],
            upstreamParameters={
                "nextUpstream": True,
                "nextUpstreamTries": 2,
                "nextUpstreamTimeout": "5s",
                "connectTimeout": "2s",
            },
        )
    )
    assert stream_record(t) == "default/coredns:5353 lc 3 30000 100 2 1 5000 default/spare:53"
    assert t.connect_timeout_ms == 2000


def test_tries_and_timeout_count_only_with_next_upstream() -> None:
    t = valid(ts(upstreamParameters={"nextUpstreamTries": 2, "nextUpstreamTimeout": "5s"}))
    assert (t.next_upstream, t.next_upstream_tries, t.next_upstream_timeout_ms) == (False, 0, 0)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"listener": {"name": "dns-udp", "protocol": "UDP"}, "host": "a.example.com"},
            # NIC's validateTLS asks for the Secret of any host, UDP or not.
            "[spec.host: Forbidden: host field is not allowed for UDP TransportServers, "
            "spec.tls: Required value: must specify spec.tls.secret when host is specified, "
            "and the TransportServer is not using the TLS Passthrough listener]",
        ),
        (
            {"upstreamParameters": {"udpRequests": 1}},
            "spec.upstreamParameters.udpRequests: Forbidden: is not allowed for non-UDP "
            "TransportServers",
        ),
        ({"action": {"pass": "nope"}}, 'spec.action.pass: Not found: "nope"'),
        ({"action": {}}, "spec.action: Required value: must specify pass"),
        (
            {"listener": {"name": "tls-passthrough", "protocol": "TCP"}, "host": "a.example.com"},
            "spec.listener.protocol: Invalid value: \"TCP\": must be 'TLS_PASSTHROUGH' for the "
            "built-in tls-passthrough listener",
        ),
        (
            {"listener": {"name": "tls-passthrough", "protocol": "TLS_PASSTHROUGH"}},
            "spec.host: Required value: must specify host for TLS Passthrough TransportServers",
        ),
        (
            {"serverSnippets": "deny all;"},
            "spec.serverSnippets: Forbidden: snippet specified but snippets feature is not enabled",
        ),
        (
            {"sessionParameters": {"timeout": "ten minutes"}},
            'spec.sessionParameters.timeout: Invalid value: "ten minutes": invalid time string',
        ),
    ],
)
def test_nics_messages(spec: dict[str, Any], message: str) -> None:
    assert problems(ts(**spec)) == message


def test_passthrough_needs_the_flag() -> None:
    obj = ts(listener={"name": "tls-passthrough", "protocol": "TLS_PASSTHROUGH"}, host="a.b")
    assert problems(obj, passthrough=False) == (
        "spec.listener: Forbidden: TLS Passthrough is not enabled"
    )
    assert valid(obj).hosts() == ("a.b",)


def test_refused_rather_than_ignored() -> None:
    up = {"name": "app", "service": "s", "port": 1, "loadBalancingMethod": "hash $remote_addr"}
    assert "not supported by ferryman: hash load balancing" in problems(ts(upstreams=[up]))
    up = {"name": "app", "service": "s", "port": 1, "healthCheck": {"enable": True}}
    assert "active health checks are NGINX Plus only" in problems(ts(upstreams=[up]))


def test_stream_conf_has_the_directive_only_settings() -> None:
    t = valid(
        ts(
            listener={"name": "dns-udp", "protocol": "UDP"},
            upstreamParameters={"udpRequests": 1, "udpResponses": 2, "connectTimeout": "1s"},
            sessionParameters={"timeout": "30s"},
        )
    )
    text = render_stream(
        [stream_server(Listener("dns-udp", 5353, "UDP", ipv4="127.0.0.1", ipv6="::1"), t)], None
    )
    for line in (
        "listen 127.0.0.1:5353 udp;",
        "listen [::1]:5353 udp;",
        "ferryman_stream_listener dns-udp;",
        "proxy_connect_timeout 1000ms;",
        "proxy_timeout 30000ms;",
        "proxy_requests 1;",
        "proxy_responses 2;",
    ):
        assert line in text


# ---- the CRDs hold the fields the parsers read ----------------------------------------


def _object_nodes(schema: Mapping[str, Any], path: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    if schema.get("type") == "array":
        yield from _object_nodes(schema["items"], path + "[]")
    if "properties" in schema:
        yield path, schema
        for key, sub in schema["properties"].items():
            yield from _object_nodes(sub, f"{path}.{key}")


@pytest.mark.parametrize("kind", ["TransportServer", "GlobalConfiguration"])
def test_the_parsers_read_exactly_the_fields_of_the_crds(kind: str) -> None:
    schema = kinds.crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    nodes = dict(_object_nodes(schema["properties"]["spec"], "spec"))
    rich = [
        ts(
            host="a.example.com",
            tls={"secret": "s"},
            upstreamParameters={"nextUpstream": True},
            sessionParameters={"timeout": "1s"},
        ),
        gc({"name": "a", "port": 1, "protocol": "TCP"}),
    ]
    objects = rich + [doc for _, doc in nic_examples() if doc.get("kind") == kind]
    read: dict[str, set[str]] = {}
    for obj in objects:
        if obj["kind"] != kind:
            continue
        ctx = Context()
        if kind == "TransportServer":
            parse_transport_server(obj, ctx)
        else:
            parse_global_configuration(obj, ctx)
        for path, keys in ctx.read.items():
            read.setdefault(path, set()).update(keys)
    assert read.keys() == nodes.keys()
    for path, keys in read.items():
        assert keys == set(nodes[path]["properties"]), path


def _stream_examples() -> list[tuple[str, dict[str, Any]]]:
    import yaml

    from testkit.nic_fixtures import NIC_EXAMPLES

    out = []
    for path in sorted(NIC_EXAMPLES.rglob("*.y*ml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") in (
                "TransportServer",
                "GlobalConfiguration",
            ):
                out.append((str(path.relative_to(NIC_EXAMPLES)), doc))
    return out


def test_nics_example_manifests_parse() -> None:
    """Every TransportServer and GlobalConfiguration file of NIC's examples is valid."""
    examples = _stream_examples()
    assert len(examples) >= 8
    for where, doc in examples:
        doc.setdefault("metadata", {}).setdefault("namespace", "default")
        if doc["kind"] == "TransportServer":
            parsed = parse_transport_server(doc)
        else:
            parsed = parse_global_configuration(doc)
        assert parsed.resource is not None and not parsed.problems, (where, parsed.message())
