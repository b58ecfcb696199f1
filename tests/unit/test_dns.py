"""ferryman's DNS zone for Angie's ``resolve`` (dataplane/dns.py): the answers as a
resolver sees them, and the server over real UDP and TCP sockets on loopback."""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import Awaitable, Callable, Mapping, Sequence

import dns.asyncquery
import dns.flags
import dns.message
import dns.name
import dns.opcode
import dns.rcode
import dns.rdatatype
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ferryman.configs.angie import backend_dns_name
from ferryman.dataplane.dns import UDP_SIZE, DnsServer, Zone
from testkit.strategies import backend_keys

WEB = "80.web.ns.ferryman.internal"
SETS = {
    "ns/web:80": [("10.0.0.1", 8080), ("10.0.0.2", 8081), ("fd00::1", 8080)],
    "ns/gone:http": [],
}


def zone(sets: Mapping[str, Sequence[tuple[str, int]]] = SETS) -> Zone:
    z = Zone()
    z.set_endpoints(sets)
    return z


def ask(
    z: Zone, name: str, rdtype: str, tcp: bool = False, **kwargs: object
) -> dns.message.Message:
    query = dns.message.make_query(name, rdtype, **kwargs)  # type: ignore[arg-type]
    wire = z.answer(query.to_wire(), tcp=tcp)
    assert wire is not None
    return dns.message.from_wire(wire)


def records(answer: dns.message.Message) -> list[str]:
    return sorted(rd.to_text() for rrset in answer.answer for rd in rrset)


def test_srv_gives_each_endpoint_its_port_and_equal_weights() -> None:
    answer = ask(zone(), f"_http._tcp.{WEB}", "SRV")
    assert answer.rcode() == dns.rcode.NOERROR
    assert answer.flags & dns.flags.AA
    assert records(answer) == [
        f"0 1 8080 10-0-0-1.{WEB}.",
        f"0 1 8080 fd00-0000-0000-0000-0000-0000-0000-0001.{WEB}.",
        f"0 1 8081 10-0-0-2.{WEB}.",
    ]
    assert {rrset.ttl for rrset in answer.answer} == {1}
    # The targets' addresses travel along, so a resolver need not ask again.
    extra = sorted(rd.to_text() for rrset in answer.additional for rd in rrset)
    assert extra == ["10.0.0.1", "10.0.0.2", "fd00::1"]


def test_targets_answer_their_address_in_its_own_family_only() -> None:
    z = zone()
    assert records(ask(z, f"10-0-0-1.{WEB}", "A")) == ["10.0.0.1"]
    target6 = f"fd00-0000-0000-0000-0000-0000-0000-0001.{WEB}"
    assert records(ask(z, target6, "AAAA")) == ["fd00::1"]
    # The other family: the name exists, without records of that type (NODATA).
    for name, rdtype in [(f"10-0-0-1.{WEB}", "AAAA"), (target6, "A")]:
        answer = ask(z, name, rdtype)
        assert answer.rcode() == dns.rcode.NOERROR
        assert answer.answer == []
        assert answer.authority[0].rdtype == dns.rdatatype.SOA


def test_backend_name_has_every_address_once_for_a_lookups() -> None:
    z = zone({"ns/web:80": [("10.0.0.1", 80), ("10.0.0.1", 81), ("10.0.0.2", 80)]})
    assert records(ask(z, WEB, "A")) == ["10.0.0.1", "10.0.0.2"]
    assert ask(z, WEB, "AAAA").answer == []


def test_known_backend_without_endpoints_is_nodata_unknown_is_nxdomain() -> None:
    z = zone()
    gone = ask(z, "_http._tcp.http.gone.ns.ferryman.internal", "SRV")
    assert (gone.rcode(), gone.answer) == (dns.rcode.NOERROR, [])
    # Negative answers carry the SOA; its minimum (the negative TTL) is 1 s.
    assert gone.authority[0][0].minimum == 1
    for name in ["_http._tcp.81.web.ns.ferryman.internal", "nope.ferryman.internal"]:
        assert ask(z, name, "SRV").rcode() == dns.rcode.NXDOMAIN
    # The names between the zone and a record exist (RFC 8020: no NXDOMAIN there).
    for name in ["ns.ferryman.internal", "web.ns.ferryman.internal", f"_tcp.{WEB}"]:
        assert ask(z, name, "A").rcode() == dns.rcode.NOERROR, name
    assert ask(z, "ferryman.internal", "SOA").answer[0].rdtype == dns.rdatatype.SOA


def test_outside_the_zone_is_refused() -> None:
    for name in ["example.com", "internal", "ferryman.internal.example.com"]:
        assert ask(zone(), name, "A").rcode() == dns.rcode.REFUSED


def test_garbage_gets_formerr_or_nothing() -> None:
    z = zone()
    assert z.answer(b"\x00\x01") is None  # not even a header
    query = dns.message.make_query(WEB, "A")
    wire = query.to_wire()
    bad = dns.message.from_wire(z.answer(wire[:-3]) or b"")  # cut in the question
    assert (bad.id, bad.rcode()) == (query.id, dns.rcode.FORMERR)
    # A response is never answered (two servers could bounce it forever).
    response = dns.message.make_response(query)
    assert z.answer(response.to_wire()) is None


def test_other_opcodes_are_not_implemented() -> None:
    query = dns.message.make_query(WEB, "A")
    query.set_opcode(dns.opcode.NOTIFY)
    answer = dns.message.from_wire(zone().answer(query.to_wire()) or b"")
    assert answer.rcode() == dns.rcode.NOTIMP


def many(n: int) -> dict[str, list[tuple[str, int]]]:
    return {"ns/web:80": [(f"10.0.{i // 256}.{i % 256}", 8000 + i) for i in range(n)]}


def test_udp_answers_fit_512_bytes_or_the_edns_size_else_truncate() -> None:
    z = zone(many(40))
    # 40 SRV records do not fit 512 bytes: truncated, the client retries on TCP.
    plain = ask(z, f"_http._tcp.{WEB}", "SRV")
    assert plain.flags & dns.flags.TC
    assert plain.answer == []
    assert len(z.answer(dns.message.make_query(f"_http._tcp.{WEB}", "SRV").to_wire()) or b"") <= (
        UDP_SIZE
    )
    # EDNS offering 4096 bytes: every record fits, additional ones are dropped first.
    big = ask(z, f"_http._tcp.{WEB}", "SRV", use_edns=0, payload=4096)
    assert not big.flags & dns.flags.TC
    assert len(records(big)) == 40
    # A few fit whole in 512 bytes, additional records included.
    small = ask(zone(many(3)), f"_http._tcp.{WEB}", "SRV")
    assert len(records(small)) == 3
    assert len(small.additional) == 3


endpoint = st.tuples(
    st.one_of(
        st.ip_addresses(v=4).map(str),
        st.ip_addresses(v=6).map(lambda a: str(ipaddress.IPv6Address(a))),
    ),
    st.integers(1, 65535),
)
endpoint_sets = st.dictionaries(
    backend_keys, st.lists(endpoint, max_size=6, unique=True), max_size=6
)


def srv_peers(z: Zone, backend_key: str) -> list[tuple[str, int]]:
    """What a resolver gets: each SRV target resolved through A/AAAA."""
    name = backend_dns_name(backend_key)
    found = []
    for rrset in ask(z, f"_http._tcp.{name}", "SRV", tcp=True).answer:
        for srv in rrset:
            for rdtype in ("A", "AAAA"):
                for addr in ask(z, srv.target.to_text(), rdtype).answer:
                    found += [(str(ipaddress.ip_address(r.address)), srv.port) for r in addr]
    return sorted(found)


@settings(max_examples=60, deadline=None)
@given(steps=st.lists(endpoint_sets, min_size=1, max_size=4))
def test_resolving_gives_back_exactly_the_endpoints_after_any_updates(
    steps: list[dict[str, list[tuple[str, int]]]],
) -> None:
    z = Zone()
    for sets in steps:
        z.set_endpoints(sets)
        # Asked after every step: a kept answer must never outlive its endpoints.
        for key, endpoints in sets.items():
            assert srv_peers(z, key) == sorted(endpoints)
    final = steps[-1]
    # Updating in steps leaves the same zone as building the last state at once.
    assert z.text() == zone(final).text()
    for gone in {k for s in steps for k in s} - final.keys():
        answer = ask(z, f"_http._tcp.{backend_dns_name(gone)}", "SRV")
        assert answer.answer == []


# ---- the server, over real sockets -----------------------------------------------------


async def _with_server(z: Zone, body: Callable[[int], Awaitable[None]]) -> None:
    server = DnsServer(z)
    port = await server.start()
    try:
        await body(port)
    finally:
        await server.stop()


def test_server_answers_over_udp_and_tcp() -> None:
    async def body(port: int) -> None:
        query = dns.message.make_query(f"_http._tcp.{WEB}", "SRV")
        for send in (dns.asyncquery.udp, dns.asyncquery.tcp):
            answer = await send(query, "127.0.0.1", port=port, timeout=2)
            assert len(records(answer)) == 3, send
        gone = await dns.asyncquery.udp(
            dns.message.make_query("x.ferryman.internal", "A"), "127.0.0.1", port=port, timeout=2
        )
        assert gone.rcode() == dns.rcode.NXDOMAIN

    asyncio.run(_with_server(zone(), body))


def test_truncated_udp_answer_is_complete_over_tcp() -> None:
    async def body(port: int) -> None:
        query = dns.message.make_query(f"_http._tcp.{WEB}", "SRV")
        answer, used_tcp = await dns.asyncquery.udp_with_fallback(
            query, "127.0.0.1", port=port, timeout=2
        )
        assert used_tcp
        assert len(records(answer)) == 300

    asyncio.run(_with_server(zone(many(300)), body))


def test_endpoint_change_is_answered_at_once() -> None:
    z = zone()

    async def body(port: int) -> None:
        query = dns.message.make_query(f"10-0-0-9.{WEB}", "A")
        before = await dns.asyncquery.udp(query, "127.0.0.1", port=port, timeout=2)
        assert before.rcode() == dns.rcode.NXDOMAIN
        z.set_endpoints({"ns/web:80": [("10.0.0.9", 80)]})
        after = await dns.asyncquery.udp(query, "127.0.0.1", port=port, timeout=2)
        assert records(after) == ["10.0.0.9"]

    asyncio.run(_with_server(z, body))


def test_a_taken_port_is_an_error() -> None:
    async def body(port: int) -> None:
        with pytest.raises(OSError):
            await DnsServer(Zone(), port).start()

    asyncio.run(_with_server(zone(), body))


def test_stop_does_not_wait_for_idle_tcp_clients() -> None:
    async def scenario() -> float:
        server = DnsServer(zone())
        port = await server.start()
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        loop = asyncio.get_running_loop()
        started = loop.time()
        await server.stop()
        writer.close()
        return loop.time() - started

    assert asyncio.run(scenario()) < 1.0
