"""Pushed records -> classic Angie configuration (no Lua): one server per virtual host.

Angie has no Lua module, so the records the NGINX flavour keeps in memory are
rendered here as plain directives instead. Hosts, paths and certificates change
the text (a reload); endpoints do not: open-source Angie's only way to change
upstream peers without a reload is ``server NAME service=... resolve``, so each
upstream names its backend in ferryman's own DNS zone (``backend_dns_name``),
which ferryman answers on loopback from the current endpoint sets
(``dataplane/dns.py``):

- a server per host: ``server_name`` exact, a one-label regex for ``*.suffix``,
  the default server for the catch-all ``_`` (or a 404 default server);
- Kubernetes path semantics as locations: Exact ``/p`` -> ``location = /p``;
  Prefix ``/p`` -> ``location = /p`` and ``location /p/``; Prefix ``/`` ->
  ``location /``; an Exact path wins a shared ``= /p``; ``location /`` falls back
  to the defaultBackend or answers 404; Exact ``/p/`` also gets ``= /p`` with
  what the other rules give ``/p`` (else Angie would redirect it to ``/p/``);
- an ``upstream`` per (backend, balancing) resolving the backend's SRV name; a
  backend with no ready peer has no upstream and its locations answer 503 (so
  only a backend's 0 <-> N transitions change the text);
- TLS per host from certificate files (``certificate_files``), or
  ``ssl_reject_handshake on`` when the Secret is unusable.

Every string here passed ``resources.validation`` or was built by ferryman.
"""

from __future__ import annotations

import base64
import ipaddress
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from ferryman.configs.model import CATCH_ALL, BackendKey, MainConfig
from ferryman.configs.render import template_environment
from ferryman.configs.routes import decode_host, match
from ferryman.wire.records import Record

SERVERS_FILE = "servers.conf"
CERTS_DIR = "certs"

# ferryman's private DNS zone for Angie's ``resolve``. ICANN reserved ``.internal``
# for private use (2024): it is never delegated in public DNS, so no real name can
# collide; and only ferryman's loopback server is ever asked (angie.conf's resolver).
DNS_ZONE = "ferryman.internal"
# The SRV service Angie looks up: ``_http._tcp.<backend name>`` (``service=`` with a
# dot is used as the prefix as is).
SRV_SERVICE = "_http._tcp"
# The resolver's answers are trusted this long (seconds): Angie re-resolves about
# once per ``valid`` + 1 s, which bounds how late an endpoint change takes effect.
DNS_TTL = 1
# The part of a backend key that becomes a DNS label: validated Kubernetes names
# (DNS-1123 / DNS-1035 labels, IANA port names or numbers) already are labels.
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


@dataclass(frozen=True)
class Location:
    exact: bool
    path: str
    upstream: str | None  # None: answer ``status``
    status: int = 0
    backend: str = ""  # the backend key, for the latency log


@dataclass(frozen=True)
class Server:
    host: str
    server_name: str  # "" for the default server
    default: bool
    tls: bool
    certificate: tuple[str, str] | None  # (chain file, key file); None with tls: reject
    redirect: bool
    locations: tuple[Location, ...]
    health_uri: str = ""  # only on a default server no Ingress routes


@dataclass(frozen=True)
class Upstream:
    name: str
    least_conn: bool
    dns_name: str  # the backend's name in DNS_ZONE; its SRV records are the peers
    max_fails: int
    fail_timeout: str  # NGINX time


@dataclass(frozen=True)
class AngieConfig:
    servers: tuple[Server, ...]
    upstreams: tuple[Upstream, ...]
    # Path relative to the state dir -> content; written 0600 (private keys).
    certificates: dict[str, bytes]


def certificate_files(cert_id: str) -> tuple[str, str]:
    """``ns/name@digest`` -> (chain, key) paths relative to the state dir."""
    base = f"{CERTS_DIR}/{cert_id.replace('/', '_')}"
    return f"{base}.crt", f"{base}.key"


def _nginx_time(seconds: str) -> str:
    """``server ... fail_timeout=`` takes whole seconds: a fraction is rounded up."""
    return f"{math.ceil(float(seconds))}s"


def backend_dns_name(backend: BackendKey) -> str:
    """``ns/svc:port`` -> ``port.svc.ns.ferryman.internal`` (no trailing dot).

    Readable on purpose: Angie's log and API show it. The three parts passed
    ``resources.validation``; anything else is refused rather than mangled.
    """
    namespace, rest = backend.split("/", 1)
    service, port = rest.rsplit(":", 1)
    for part in (namespace, service, port):
        if not _LABEL.fullmatch(part):
            raise ValueError(f"backend {backend!r}: {part!r} is not a DNS label")
    return f"{port}.{service}.{namespace}.{DNS_ZONE}"


def target_label(address: str) -> str:
    """An endpoint address as the first label of its SRV target name:
    ``10-0-0-1``, IPv6 written out in full with ``-`` for ``:``."""
    ip = ipaddress.ip_address(address)
    text = ip.exploded if ip.version == 6 else str(ip)
    return text.replace(".", "-").replace(":", "-")


def endpoint_sets(
    records: Mapping[tuple[str, str], str],
) -> dict[BackendKey, tuple[tuple[str, int], ...]]:
    """Every backend the hosts name or the endpoint records list -> its ready
    (address, port) pairs; ``()`` for a backend known to have none."""
    sets: dict[BackendKey, tuple[tuple[str, int], ...]] = {}
    for (kind, key), value in records.items():
        if kind == Record.HOST:
            _, _, default, exact, prefix = decode_host(value)
            for backend in [*exact.values(), *prefix.values(), default]:
                if backend is not None:
                    sets.setdefault(backend, ())
        elif kind == Record.ENDPOINTS and value:
            pairs = (p.rsplit("#", 1) for p in value.split(" "))
            sets[key] = tuple((addr, int(port)) for addr, port in pairs)
    return sets


def _server_name(host: str) -> str:
    if host.startswith("*."):
        return "~^[^.]+" + host[1:].replace(".", r"\.") + "$"
    return host


def angie_config(
    records: Mapping[tuple[str, str], str], state_dir: str, health_uri: str = ""
) -> AngieConfig:
    """The model for the records the controller pushed: its hosts, endpoint sets and
    certificates (``(Record, key) -> value``)."""
    ready = {key for (kind, key), value in records.items() if kind == Record.ENDPOINTS and value}
    upstreams: dict[str, Upstream] = {}
    certificates: dict[str, bytes] = {}
    servers: list[Server] = []

    def upstream_for(backend: str, balancing: str) -> str | None:
        if backend not in ready:
            return None
        method, max_fails, fail_timeout = balancing.split(":")
        timeout = _nginx_time(fail_timeout)
        name = "_".join([*backend.replace("/", ":").split(":"), method, max_fails, timeout])
        upstreams.setdefault(
            name,
            Upstream(name, method == "lc", backend_dns_name(backend), int(max_fails), timeout),
        )
        return name

    def location(exact: bool, path: str, backend: str | None, balancing: str) -> Location:
        if backend is None:
            return Location(exact, path, None, 404)
        name = upstream_for(backend, balancing)
        return Location(exact, path, name, 0 if name else 503, backend if name else "")

    hosts = sorted((key, value) for (kind, key), value in records.items() if kind == Record.HOST)
    for host, line in hosts:
        tls, redirect, default, exact, prefix = decode_host(line)
        balancing = line.split(" ")[3]
        locations: dict[tuple[bool, str], Location] = {}
        for path, backend in exact.items():
            locations[(True, path)] = location(True, path, backend, balancing)
        for path, backend in prefix.items():
            if path == "/":
                locations[(False, "/")] = location(False, "/", backend, balancing)
                continue
            locations.setdefault((True, path), location(True, path, backend, balancing))
            locations[(False, path + "/")] = location(False, path + "/", backend, balancing)
        if (False, "/") not in locations:
            locations[(False, "/")] = location(False, "/", default, balancing)
        # Angie (as NGINX) answers ``/p`` with a 301 to ``/p/`` when a proxying
        # location is named ``/p/`` (Exact ``/p/``) and none names ``/p`` exactly,
        # even over a Prefix ``/``; Kubernetes gives ``/p`` whatever its rules say.
        for _, path in list(locations):
            bare = path[:-1]
            if bare and path.endswith("/") and (True, bare) not in locations:
                target = match(exact, prefix, default, bare)
                locations[(True, bare)] = location(True, bare, target, balancing)
        certificate = None
        if tls not in ("-", "!") and (Record.CERTIFICATE, tls) in records:
            chain_b64, key_b64 = records[(Record.CERTIFICATE, tls)].split("\t")
            chain_file, key_file = certificate_files(tls)
            certificates[chain_file] = base64.b64decode(chain_b64)
            certificates[key_file] = base64.b64decode(key_b64)
            certificate = (f"{state_dir}/{chain_file}", f"{state_dir}/{key_file}")
        catch_all = host == CATCH_ALL
        servers.append(
            Server(
                host=host,
                server_name="" if catch_all else _server_name(host),
                default=catch_all,
                tls=tls != "-",
                certificate=certificate,
                redirect=redirect and tls != "-",
                locations=tuple(sorted(locations.values(), key=lambda x: (x.path, not x.exact))),
            )
        )
    if not any(s.default for s in servers):
        servers.append(
            Server(
                host=CATCH_ALL,
                server_name="",
                default=True,
                tls=False,
                certificate=None,
                redirect=False,
                locations=(Location(False, "/", None, 404),),
                health_uri=health_uri,
            )
        )
    # Exact names first, then the wildcards, then the default server.
    servers.sort(key=lambda s: (s.default, s.host.startswith("*."), s.host))
    return AngieConfig(
        tuple(servers), tuple(sorted(upstreams.values(), key=lambda u: u.name)), certificates
    )


class AngieRenderer:
    def __init__(self, *, ipv6: bool = True) -> None:
        """``ipv6``: the servers listen on IPv6 too (not --disable-ipv6)."""
        self._env = template_environment()
        self._ipv6 = ipv6

    def main(self, main: MainConfig, dns_port: int) -> str:
        """``dns_port``: where ferryman's DNS server answers on 127.0.0.1."""
        return self._env.get_template("angie.conf.tmpl").render(
            main=main, servers_file=SERVERS_FILE, dns_port=dns_port, dns_ttl=DNS_TTL
        )

    def servers(
        self,
        config: AngieConfig,
        http_port: int,
        https_port: int,
        zone_size: str = "128m",
        latency: bool = False,
    ) -> str:
        """``zone_size``: the one shared memory zone all upstreams' peers live in;
        ``latency``: proxying locations name their route for the latency log."""
        return self._env.get_template("angie-servers.conf.tmpl").render(
            config=config,
            http_port=http_port,
            https_port=https_port,
            zone_size=zone_size,
            srv_service=SRV_SERVICE,
            latency=latency,
            ipv6=self._ipv6,
        )

    def config_version(self, socket: str, version: int, api: bool = True) -> str:
        """The version server; ``api``: also Angie's status API (``nginx -t`` lacks it)."""
        return self._env.get_template("angie-config-version.conf.tmpl").render(
            socket=socket, version=version, api=api
        )
