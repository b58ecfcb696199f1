"""An authoritative DNS server on loopback for Angie's ``server NAME resolve``.

Open-source Angie has no Lua and a read-only API: the one way its upstream peers
change without a reload is re-resolving a name. So ferryman answers for its own
zone (``configs.angie.DNS_ZONE``) from the endpoint sets it already tracks:

- ``_http._tcp.<backend name>`` SRV: one record per ready endpoint, its port, equal
  weights and priorities (endpoints of one backend may listen on different ports,
  which plain A records could not say);
- ``<address label>.<backend name>`` A or AAAA: the endpoint's address (also sent
  as additional records when they fit);
- ``<backend name>`` A and AAAA: every endpoint address once, for resolvers that
  only look up addresses (NGINX's ``proxy_pass http://$name:port``, ``server NAME:port
  resolve``); meaningful when the endpoints share one port;
- a name in the zone with no records of the asked type (a backend without ready
  endpoints, an A query for an IPv6 target, names between the zone and a record):
  NOERROR with no answer; a name that does not exist: NXDOMAIN. Both carry the
  zone's SOA, whose minimum is the TTL, so negative answers are not cached longer;
- names outside the zone: REFUSED (this server is no recursive resolver).

UDP answers fit 512 bytes, or the EDNS size the query offers: additional records
are dropped first, then the answer is truncated (TC) so the client asks again over
TCP, where up to 65,535 bytes fit. dnspython parses and builds the messages; the
sockets are asyncio's, in ferryman's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
import struct
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import dns.exception
    import dns.flags
    import dns.message
    import dns.name
    import dns.opcode
    import dns.rcode
    import dns.rdata
    import dns.rdataclass
    import dns.rdatatype
    import dns.rdtypes.ANY.SOA
    import dns.rdtypes.IN.A
    import dns.rdtypes.IN.AAAA
    import dns.rdtypes.IN.SRV
    import dns.rrset
else:

    class _Dnspython:
        """Stands for the ``dns`` package until it is first used: dnspython adds
        ~4.5 MB to the RSS of every process that imports it, and only the Angie
        flavour answers DNS."""

        def __getattr__(self, name: str) -> Any:
            import dns.exception
            import dns.flags
            import dns.message
            import dns.name
            import dns.opcode
            import dns.rcode
            import dns.rdata
            import dns.rdataclass
            import dns.rdatatype
            import dns.rdtypes.ANY.SOA
            import dns.rdtypes.IN.A
            import dns.rdtypes.IN.AAAA
            import dns.rdtypes.IN.SRV
            import dns.rrset

            globals()["dns"] = dns
            return getattr(dns, name)

    dns = _Dnspython()

from ferryman.configs.angie import (
    DNS_TTL,
    DNS_ZONE,
    SRV_SERVICE,
    backend_dns_name,
    target_label,
)
from ferryman.configs.model import BackendKey

log = logging.getLogger("ferryman.dns")

# RFC 1035's UDP limit for queries without EDNS.
UDP_SIZE = 512
# The largest UDP answer ferryman sends whatever EDNS offers: bigger datagrams
# fragment, and the client falls back to TCP anyway.
MAX_UDP_SIZE = 4096
TCP_IDLE_TIMEOUT = 10.0  # seconds a TCP client may stay silent between queries
# Right after a reload Angie's workers resolve every upstream at once: with the
# default receive buffer (~208 KiB) a burst from 1,000 upstreams overflowed it, and
# a dropped query costs its upstream Angie's 5 s resend timeout (a new Ingress took
# 5.7 s to route after a 0.5 s reload). The kernel caps it at net.core.rmem_max.
UDP_RECEIVE_BUFFER = 8 * 1024 * 1024
# Encoded answers kept (see Zone.answer); garbage queries cannot grow it past this.
MAX_CACHED_ANSWERS = 100_000

Endpoints = Sequence[tuple[str, int]]


class _Backend:
    """One backend's records, kept until its endpoints change."""

    def __init__(self, endpoints: tuple[tuple[str, int], ...]) -> None:
        self.endpoints = endpoints
        self.records: dict[tuple[dns.name.Name, int], dns.rrset.RRset] = {}
        self.names: list[dns.name.Name] = []


class Zone:
    """The zone's records, updated from the endpoint sets; answers are lookups.

    Only backends whose endpoints changed are rebuilt: a push that moves one
    endpoint of ten thousand backends costs one backend's records.
    """

    def __init__(self, origin: str = DNS_ZONE, ttl: int = DNS_TTL) -> None:
        self.origin = dns.name.from_text(origin)
        self.ttl = ttl
        soa = _soa(
            dns.name.from_text("ns", self.origin),
            dns.name.from_text("hostmaster", self.origin),
            ttl,  # the negative-caching TTL (RFC 2308)
        )
        self._soa = dns.rrset.from_rdata(self.origin, ttl, soa)
        self._backends: dict[BackendKey, _Backend] = {}
        self._records: dict[tuple[dns.name.Name, int], dns.rrset.RRset] = {}
        self._additional: dict[dns.name.Name, list[dns.rrset.RRset]] = {}
        # How many backends each existing name belongs to (names between the zone
        # and a record are shared by the backends below them).
        self._names: Counter[dns.name.Name] = Counter({self.origin: 1})
        # Encoding an answer costs ~0.4 ms in dnspython, and Angie asks the same
        # questions every couple of seconds for every upstream: answers are kept,
        # keyed by the query without its id, and dropped per backend on change.
        self._cache: dict[tuple[bytes, bool], bytes] = {}
        self._cached_by_backend: dict[BackendKey | None, list[tuple[bytes, bool]]] = {}
        self._backend_of_base: dict[dns.name.Name, BackendKey] = {}

    def set_endpoints(self, sets: Mapping[BackendKey, Endpoints]) -> None:
        """Make the zone say exactly this: backend key -> its ready (address, port)s."""
        for backend in self._backends.keys() - sets.keys():
            self._remove(backend)
        for backend, endpoints in sets.items():
            known = self._backends.get(backend)
            if known is None or known.endpoints != tuple(endpoints):
                if known is not None:
                    self._remove(backend)
                self._add(backend, tuple(endpoints))

    def _forget_answers(self, backend: BackendKey) -> None:
        # Names outside every backend (NXDOMAIN, the names above them) may change
        # with any backend.
        for owner in (backend, None):
            for key in self._cached_by_backend.pop(owner, ()):
                self._cache.pop(key, None)

    def _remove(self, backend: BackendKey) -> None:
        self._forget_answers(backend)
        old = self._backends.pop(backend)
        self._backend_of_base.pop(dns.name.from_text(backend_dns_name(backend)), None)
        for key in old.records:
            self._records.pop(key, None)
            self._additional.pop(key[0], None)
        self._names.subtract(old.names)
        self._names += Counter()  # drops the names no backend has any more

    def _add(self, backend: BackendKey, endpoints: tuple[tuple[str, int], ...]) -> None:
        self._forget_answers(backend)
        entry = _Backend(endpoints)
        base = dns.name.from_text(backend_dns_name(backend))
        self._backend_of_base[base] = backend
        srv_name = dns.name.from_text(SRV_SERVICE, base)
        names = {srv_name}
        # The names between the zone and a record exist too (empty non-terminals):
        # NXDOMAIN for them would deny everything below (RFC 8020).
        name = srv_name.parent()
        while name != self.origin:
            names.add(name)
            name = name.parent()
        srvs: list[dns.rdata.Rdata] = []
        targets: dict[dns.name.Name, dns.rrset.RRset] = {}
        by_family: dict[int, list[dns.rdata.Rdata]] = {}
        for address in dict.fromkeys(a for a, _ in endpoints):
            rdata = _address(address)
            by_family.setdefault(rdata.rdtype, []).append(rdata)
        for rdtype, rdatas in by_family.items():
            entry.records[(base, rdtype)] = dns.rrset.from_rdata_list(base, self.ttl, rdatas)
        for address, port in endpoints:
            target = dns.name.from_text(target_label(address), base)
            srvs.append(_srv(port, target))
            if target not in targets:
                targets[target] = dns.rrset.from_rdata(target, self.ttl, _address(address))
                entry.records[(target, targets[target].rdtype)] = targets[target]
                names.add(target)
        if srvs:
            srv = dns.rrset.from_rdata_list(srv_name, self.ttl, srvs)
            entry.records[(srv_name, dns.rdatatype.SRV)] = srv
            self._additional[srv_name] = list(targets.values())
        entry.names = sorted(names)
        self._records.update(entry.records)
        self._names.update(entry.names)
        self._backends[backend] = entry

    def text(self) -> str:
        """Every record in zone-file syntax, sorted (``ferryman render``, debugging)."""
        lines = [self._soa.to_text()]
        lines += sorted(r.to_text() for r in self._records.values())
        return "\n".join(lines) + "\n"

    def answer(self, wire: bytes, tcp: bool = False) -> bytes | None:
        """The answer to one query message; None when it deserves none (garbage)."""
        key = (wire[2:], tcp)
        cached = self._cache.get(key)
        if cached is not None:
            return wire[:2] + cached
        return self._answer(wire, key)

    def _owner(self, name: dns.name.Name) -> BackendKey | None:
        while name != self.origin and len(name) > len(self.origin):
            if (backend := self._backend_of_base.get(name)) is not None:
                return backend
            name = name.parent()
        return None

    def _remember(self, key: tuple[bytes, bool], name: dns.name.Name, out: bytes) -> None:
        if len(self._cache) >= MAX_CACHED_ANSWERS:
            self._cache.clear()
            self._cached_by_backend.clear()
        self._cache[key] = out[2:]
        self._cached_by_backend.setdefault(self._owner(name), []).append(key)

    def _answer(self, wire: bytes, key: tuple[bytes, bool]) -> bytes | None:
        tcp = key[1]
        try:
            query = dns.message.from_wire(wire)
        except dns.exception.DNSException:
            return _format_error(wire)
        if query.flags & dns.flags.QR:
            return None  # an answer sent to us: answering it could start a loop
        response = dns.message.make_response(query, our_payload=MAX_UDP_SIZE)
        if query.opcode() != dns.opcode.QUERY:
            response.set_rcode(dns.rcode.NOTIMP)
            return response.to_wire()
        if len(query.question) != 1:
            response.set_rcode(dns.rcode.FORMERR)
            return response.to_wire()
        question = query.question[0]
        name = question.name
        if question.rdclass != dns.rdataclass.IN or not name.is_subdomain(self.origin):
            response.set_rcode(dns.rcode.REFUSED)
            return response.to_wire()
        response.flags |= dns.flags.AA
        rrset = self._records.get((name, question.rdtype))
        if question.rdtype == dns.rdatatype.SOA and name == self.origin:
            rrset = self._soa
        if rrset is not None:
            response.answer.append(rrset)
            response.additional.extend(self._additional.get(name, ()))
        else:
            if name not in self._names:
                response.set_rcode(dns.rcode.NXDOMAIN)
            response.authority.append(self._soa)
        out = _to_wire(response, self._max_size(query, tcp))
        self._remember(key, name, out)
        return out

    @staticmethod
    def _max_size(query: dns.message.Message, tcp: bool) -> int:
        if tcp:
            return 65535
        if query.edns >= 0:
            return max(UDP_SIZE, min(query.payload, MAX_UDP_SIZE))
        return UDP_SIZE


# dnspython's rdata constructors are untyped; each is wrapped once here.
def _srv(port: int, target: dns.name.Name) -> dns.rdata.Rdata:
    # Priority 0 and weight 1 for all: every endpoint is primary, equally loaded.
    srv: dns.rdata.Rdata = dns.rdtypes.IN.SRV.SRV(  # type: ignore[no-untyped-call]
        dns.rdataclass.IN, dns.rdatatype.SRV, 0, 1, port, target
    )
    return srv


def _address(address: str) -> dns.rdata.Rdata:
    ip = ipaddress.ip_address(address)
    rdata: dns.rdata.Rdata
    if ip.version == 4:
        rdata = dns.rdtypes.IN.A.A(dns.rdataclass.IN, dns.rdatatype.A, str(ip))  # type: ignore[no-untyped-call]
    else:
        rdata = dns.rdtypes.IN.AAAA.AAAA(dns.rdataclass.IN, dns.rdatatype.AAAA, str(ip))  # type: ignore[no-untyped-call]
    return rdata


def _soa(mname: dns.name.Name, rname: dns.name.Name, minimum: int) -> dns.rdata.Rdata:
    # serial, refresh, retry, expire: nobody transfers this zone; only minimum matters.
    soa: dns.rdata.Rdata = dns.rdtypes.ANY.SOA.SOA(  # type: ignore[no-untyped-call]
        dns.rdataclass.IN, dns.rdatatype.SOA, mname, rname, 1, 3600, 600, 86400, minimum
    )
    return soa


def _to_wire(response: dns.message.Message, max_size: int) -> bytes:
    """The whole answer if it fits; else without additional records; else truncated."""
    try:
        return response.to_wire(max_size=max_size)
    except dns.exception.TooBig:
        pass
    response.additional.clear()
    try:
        return response.to_wire(max_size=max_size)
    except dns.exception.TooBig:
        pass
    response.answer.clear()
    response.flags |= dns.flags.TC
    return response.to_wire(max_size=max_size)


def _format_error(wire: bytes) -> bytes | None:
    if len(wire) < 12:
        return None  # not even a header: nobody to answer
    (query_id, flags) = struct.unpack("!HH", wire[:4])
    if flags & dns.flags.QR:
        return None
    response = dns.message.Message(id=query_id)
    response.flags = dns.flags.QR
    response.set_rcode(dns.rcode.FORMERR)
    return response.to_wire()


class _UdpProtocol(asyncio.DatagramProtocol):
    def __init__(self, zone: Zone) -> None:
        self._zone = zone
        self._transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # Python 3.11's selector transport does not subclass DatagramTransport.
        self._transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str | int, ...]) -> None:
        answer = self._zone.answer(data)
        if answer is not None and self._transport is not None:
            self._transport.sendto(answer, addr)


class DnsServer:
    """``Zone`` answered over UDP and TCP on one loopback port (0: any free port)."""

    def __init__(self, zone: Zone, port: int = 0, host: str = "127.0.0.1") -> None:
        self.zone = zone
        self._host = host
        self._wanted = port
        self.port = 0
        self._udp: asyncio.DatagramTransport | None = None
        self._tcp: asyncio.Server | None = None
        self._clients: set[asyncio.StreamWriter] = set()

    async def start(self) -> int:
        """Bind both sockets; returns the port. Raises OSError when it is taken."""
        loop = asyncio.get_running_loop()
        # With port 0 the kernel picks the UDP port, which may be taken for TCP:
        # try a few.
        for attempt in range(20):
            udp, _ = await loop.create_datagram_endpoint(
                lambda: _UdpProtocol(self.zone), local_addr=(self._host, self._wanted)
            )
            port = int(udp.get_extra_info("sockname")[1])
            udp.get_extra_info("socket").setsockopt(
                socket.SOL_SOCKET, socket.SO_RCVBUF, UDP_RECEIVE_BUFFER
            )
            try:
                self._tcp = await asyncio.start_server(self._serve_tcp, self._host, port)
            except OSError:
                udp.close()
                if self._wanted or attempt == 19:
                    raise
                continue
            self._udp, self.port = udp, port
            break
        log.info("dns server started", extra={"fields": {"address": f"{self._host}:{self.port}"}})
        return self.port

    async def _serve_tcp(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._clients.add(writer)
        try:
            while True:
                header = await asyncio.wait_for(reader.readexactly(2), TCP_IDLE_TIMEOUT)
                (length,) = struct.unpack("!H", header)
                wire = await asyncio.wait_for(reader.readexactly(length), TCP_IDLE_TIMEOUT)
                answer = self.zone.answer(wire, tcp=True)
                if answer is None:
                    break
                writer.write(struct.pack("!H", len(answer)) + answer)
                await writer.drain()
        except (asyncio.IncompleteReadError, TimeoutError, ConnectionError):
            pass
        finally:
            self._clients.discard(writer)
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def stop(self) -> None:
        if self._udp is not None:
            self._udp.close()
        if self._tcp is not None:
            self._tcp.close()
            # Idle clients would hold wait_closed() for TCP_IDLE_TIMEOUT.
            for writer in list(self._clients):
                writer.close()
            await self._tcp.wait_closed()
