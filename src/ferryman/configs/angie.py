"""Pushed records -> classic Angie configuration (no Lua): one server per virtual host.

Angie has no Lua module, so the records the NGINX flavour keeps in memory are
rendered here as plain directives instead, and every change means a reload:

- a server per host: ``server_name`` exact, a one-label regex for ``*.suffix``,
  the default server for the catch-all ``_`` (or a 404 default server);
- Kubernetes path semantics as locations: Exact ``/p`` -> ``location = /p``;
  Prefix ``/p`` -> ``location = /p`` and ``location /p/``; Prefix ``/`` ->
  ``location /``; an Exact path wins a shared ``= /p``; ``location /`` falls back
  to the defaultBackend or answers 404;
- an ``upstream`` per (backend, balancing) with the ready peers; a backend with no
  ready peer has no upstream and its locations answer 503;
- TLS per host from certificate files (``certificate_files``), or
  ``ssl_reject_handshake on`` when the Secret is unusable.

Every string here passed ``resources.validation`` or was built by ferryman.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping
from dataclasses import dataclass

from ferryman.configs.model import CATCH_ALL, MainConfig
from ferryman.configs.render import template_environment
from ferryman.configs.routes import decode_host

SERVERS_FILE = "servers.conf"
CERTS_DIR = "certs"


@dataclass(frozen=True)
class Location:
    exact: bool
    path: str
    upstream: str | None  # None: answer ``status``
    status: int = 0


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
    peers: tuple[str, ...]  # "addr:port", IPv6 in brackets
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


def _peer(value: str) -> str:
    addr, port = value.rsplit("#", 1)
    return f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"


def _server_name(host: str) -> str:
    if host.startswith("*."):
        return "~^[^.]+" + host[1:].replace(".", r"\.") + "$"
    return host


def angie_config(
    records: Mapping[tuple[str, str], str], state_dir: str, health_uri: str = ""
) -> AngieConfig:
    """The model for the records the controller pushed (``("H"|"E"|"C", key) -> value``)."""
    peers = {key: value.split(" ") for (kind, key), value in records.items() if kind == "E"}
    upstreams: dict[str, Upstream] = {}
    certificates: dict[str, bytes] = {}
    servers: list[Server] = []

    def upstream_for(backend: str, balancing: str) -> str | None:
        if not peers.get(backend):
            return None
        method, max_fails, fail_timeout = balancing.split(":")
        timeout = _nginx_time(fail_timeout)
        name = "_".join([*backend.replace("/", ":").split(":"), method, max_fails, timeout])
        upstreams.setdefault(
            name,
            Upstream(
                name,
                method == "lc",
                tuple(_peer(p) for p in peers[backend]),
                int(max_fails),
                timeout,
            ),
        )
        return name

    def location(exact: bool, path: str, backend: str | None, balancing: str) -> Location:
        if backend is None:
            return Location(exact, path, None, 404)
        name = upstream_for(backend, balancing)
        return Location(exact, path, name, 0 if name else 503)

    hosts = sorted((key, value) for (kind, key), value in records.items() if kind == "H")
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
        certificate = None
        if tls not in ("-", "!") and ("C", tls) in records:
            chain_b64, key_b64 = records[("C", tls)].split("\t")
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
    def __init__(self) -> None:
        self._env = template_environment()

    def main(self, main: MainConfig) -> str:
        return self._env.get_template("angie.conf.tmpl").render(
            main=main, servers_file=SERVERS_FILE
        )

    def servers(self, config: AngieConfig, http_port: int, https_port: int) -> str:
        return self._env.get_template("angie-servers.conf.tmpl").render(
            config=config, http_port=http_port, https_port=https_port
        )

    def config_version(self, socket: str, version: int, api: bool = True) -> str:
        """The version server; ``api``: also Angie's status API (``nginx -t`` lacks it)."""
        return self._env.get_template("angie-config-version.conf.tmpl").render(
            socket=socket, version=version, api=api
        )
