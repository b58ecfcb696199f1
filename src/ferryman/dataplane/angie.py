"""Angie as the data plane: classic configuration, endpoints through DNS.

Angie has no Lua module, so records cannot be pushed into its memory: every push
re-renders ``servers.conf`` (servers and upstreams, ``configs/angie.py``) from
the merged records, writes the certificates it names (0600 under ``certs/``) and,
when the text changed, reloads through ``NginxManager`` (``angie -t``, SIGHUP,
then the version socket confirms). The text names each backend's DNS name, not
its peers: endpoint changes only update the ``Zone`` that ferryman's DNS server
answers Angie's ``resolve`` lookups from, with no reload. Only a backend's
0 <-> N transitions change the text (no endpoints: its locations answer 503).

Until the public ``angie.conf`` is live (start-up), pushes only stage the text:
the one start-up reload (``apply``) brings ``servers.conf`` along, so Angie
reloads once at start-up, as NGINX does, and always has a ``servers.conf``,
even when no Ingress is served.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from pathlib import Path

import aiohttp

from ferryman.configs.angie import (
    SERVERS_FILE,
    AngieConfig,
    AngieRenderer,
    angie_config,
    endpoint_sets,
)
from ferryman.dataplane import PushResult, merge_records
from ferryman.dataplane.dns import Endpoints, Zone
from ferryman.dataplane.errors import ConfigError, DataPlaneError, PushError, ReloadError
from ferryman.dataplane.files import atomic_write
from ferryman.dataplane.in_flight import InFlight, angie_peer_counts, angie_replica_count
from ferryman.dataplane.nginx import NginxManager, unix_get
from ferryman.dataplane.output import OutputDirectory
from ferryman.dataplane.reloads import ENDPOINTS, OTHER
from ferryman.dataplane.state_dir import Paths
from ferryman.observability.metrics import parse_angie_status, worker_processes
from ferryman.wire.records import Record, RecordKey

ZONE_FILE = "zone.txt"  # ``render`` only: the DNS records, in zone-file syntax


class AngiePaths(Paths):
    """The NGINX layout, with ``angie.conf`` as the main file."""

    @property
    def main(self) -> Path:
        return self.state_dir / "angie.conf"

    def generation_socket(self, version: int) -> Path:
        # One socket for every version: Angie's API (its status, its generation
        # counter) answers there, and AngieGeneration confirms its reloads.
        return self.version_socket


async def _get_json(socket: Path, path: str) -> object:
    """GET ``path`` of Angie's API on the version socket, as JSON."""
    try:
        status, text = await unix_get(socket, f"http://angie{path}")
    except (aiohttp.ClientError, OSError, TimeoutError) as e:
        raise DataPlaneError(f"angie {path}: {e or type(e).__name__}") from e
    if status != 200:
        raise DataPlaneError(f"angie {path}: {status} {text[:200]}")
    try:
        return json.loads(text)
    except ValueError as e:
        raise DataPlaneError(f"angie {path}: not JSON: {text[:200]!r}") from e


async def angie_counters(socket: Path) -> dict[str, int]:
    """Angie's ``/status/`` counters as stub_status's fields, for the /metrics scrape
    (Angie's numbers for ``nginx_ingress_nginx_*``)."""
    reading = parse_angie_status(await _get_json(socket, "/status/"))
    if reading is None:
        raise DataPlaneError("angie /status/: not Angie's status document")
    return reading


# How long after a peer left an endpoint set Angie may still have requests to it
# that its API cannot name (seconds; ferryman.lua's GONE_TTL is the same bound).
PEERS_LEFT_SECONDS = 600.0


async def angie_in_flight(socket: Path, master: int | None, peers_left: bool) -> InFlight:
    """Requests in flight now, from Angie's ``/status/http/`` (in_flight.py says
    which numbers). Two kinds of request to a peer are in no count the API
    shows, so while either can exist, peers are not measured:

    - a worker still draining after a reload (``master``'s children): an
      upstream's peers live in a zone each configuration makes anew;
    - a request to a peer DNS dropped from its upstream (``peers_left``: some
      peer left an endpoint set lately): the peer lives on unnamed, a
      "zombie", until its requests end (release builds do not show zombies).
      Every such request is one of the replica's, not at any named peer: when
      the replica's requests are all at named peers, there is none.
    """
    http = _json_object(await _get_json(socket, "/status/http/"))
    try:
        peers, complete = angie_peer_counts(http.get("upstreams", {}))
        replica = angie_replica_count(http.get("server_zones", {}))
    except ValueError as e:
        raise DataPlaneError(f"angie /status/http/: {e}") from e
    unnamed = peers_left and replica > sum(peers.values())
    measured = complete and not unnamed and worker_processes(master)["old"] == 0
    return InFlight(peers, replica, peers_measured=measured)


def _json_object(value: object) -> Mapping[str, object]:
    if not isinstance(value, Mapping):
        raise DataPlaneError(f"angie /status/http/: not an object: {value!r:.200}")
    return value


class AngieGeneration:
    """Angie's ``/status/angie/generation`` (the version server's API location):
    a counter of configuration loads. A reload is confirmed when it moved on,
    besides the version socket answering the new version (``NginxManager``)."""

    POLL_INTERVAL = 0.02  # seconds

    def __init__(self, socket: Path) -> None:
        self._socket = socket

    async def read(self) -> int:
        try:
            value = await _get_json(self._socket, "/status/angie/generation")
        except DataPlaneError as e:
            raise ReloadError(str(e)) from e
        if not isinstance(value, int) or isinstance(value, bool):
            raise ReloadError(f"angie generation: not a number: {value!r}")
        return value

    async def before(self) -> int:
        return await self.read()

    async def confirm(self, before: int, deadline: float) -> None:
        last: int | str = before
        while time.monotonic() < deadline:
            try:
                last = await self.read()
            except ReloadError as e:
                last = str(e)
            if isinstance(last, int) and last > before:
                return
            await asyncio.sleep(self.POLL_INTERVAL)
        raise ReloadError(f"angie generation did not move on from {before} (last: {last})")


class AngieDataPlane:
    def __init__(
        self,
        manager: NginxManager,
        paths: Paths,
        renderer: AngieRenderer,
        http_port: int,
        https_port: int,
        health_uri: str = "",
        zone: Zone | None = None,
        zone_size: str = "128m",
        latency: bool = False,
    ) -> None:
        self.manager = manager
        self._paths = paths
        self._renderer = renderer
        self._http_port = http_port
        self._https_port = https_port
        self._health_uri = health_uri
        self.zone = zone if zone is not None else Zone()
        self._latency = latency  # --enable-latency-metrics
        self._zone_size = zone_size
        self._records: dict[RecordKey, str] = {}
        self._endpoints: dict[str, Endpoints] = {}  # what the zone answers
        self._servers: str | None = None  # the servers.conf Angie runs (or will, at start-up)
        self._live = False  # the public angie.conf, which includes servers.conf, is loaded
        self._certificates: set[str] = set()  # written certificate files (relative)
        self._version = 0
        self._peers_left_at = -PEERS_LEFT_SECONDS  # time.monotonic() a peer last left a set

    async def in_flight(self) -> InFlight:
        left = time.monotonic() - self._peers_left_at < PEERS_LEFT_SECONDS
        return await angie_in_flight(self._paths.version_socket, self.manager.pid, left)

    async def apply(self, files: Mapping[str, str | None]) -> float:
        """ferryman's own files (the public ``angie.conf``), with the servers
        pushed so far: one reload."""
        servers = self._servers
        if servers is None:
            servers = self._render(self._records)[1]
        seconds = await self.manager.apply({**files, SERVERS_FILE: servers})
        self._servers = servers
        self._live = True
        return seconds

    def _render(self, records: Mapping[RecordKey, str]) -> tuple[AngieConfig, str]:
        config = angie_config(records, str(self._paths.state_dir), self._health_uri)
        text = self._renderer.servers(
            config, self._http_port, self._https_port, self._zone_size, self._latency
        )
        return config, text

    def _write_certificates(self, certificates: Mapping[str, bytes]) -> None:
        for rel, data in certificates.items():
            path = self._paths.state_dir / rel
            # Named by content (the id holds a digest): an existing file is current.
            if rel in self._certificates and path.exists():
                continue
            path.parent.mkdir(mode=0o700, exist_ok=True)
            atomic_write(path, data, mode=0o600)
            self._certificates.add(rel)

    async def push(self, records: Mapping[RecordKey, str], full: bool) -> PushResult:
        """Re-render the servers from the merged records and reload when they changed."""
        merged = dict(self._records)
        merge_records(merged, records, full)
        config, text = self._render(merged)
        endpoints = endpoint_sets(merged)
        self._write_certificates(config.certificates)
        if not self._live:
            self._servers = text  # the start-up reload brings it along
        elif text != self._servers:
            changed = {k[0] for k in merged.keys() | self._records.keys()
                       if merged.get(k) != self._records.get(k)}  # fmt: skip
            reason = ENDPOINTS if changed == {Record.ENDPOINTS} else OTHER
            # A new upstream's workers resolve at once: its names must answer
            # before the reload. A backend that lost its last endpoint keeps its
            # old answers until its locations answer 503 instead.
            emptied = {b: old for b, old in self._endpoints.items() if old and not endpoints.get(b)}
            self.zone.set_endpoints({**endpoints, **emptied})
            try:
                await self.manager.apply({SERVERS_FILE: text}, reason)
            except ConfigError as e:
                self.zone.set_endpoints(self._endpoints)
                raise PushError(f"angie did not take the new servers: {e}") from e
            self._servers = text
        self.zone.set_endpoints(endpoints)
        if any(set(old) - set(endpoints.get(b, ())) for b, old in self._endpoints.items()):
            self._peers_left_at = time.monotonic()
        self._endpoints = dict(endpoints)
        for rel in self._certificates - config.certificates.keys():
            (self._paths.state_dir / rel).unlink(missing_ok=True)
        self._certificates &= config.certificates.keys()
        self._records = merged
        self._version += 1
        return PushResult(self._version)


class AngieOutputDirectory(OutputDirectory):
    """``ferryman render --data-plane angie``: records.txt, plus the servers file,
    certificates (0600) Angie would be given and the DNS zone it would be answered
    (``zone.txt``)."""

    def __init__(
        self, root: Path, renderer: AngieRenderer, http_port: int, https_port: int
    ) -> None:
        super().__init__(root)
        self._renderer = renderer
        self._http_port = http_port
        self._https_port = https_port

    async def push(self, records: Mapping[RecordKey, str], full: bool) -> PushResult:
        result = await super().push(records, full)
        config = angie_config(self.records, str(self._root))
        for rel, data in config.certificates.items():
            (self._root / rel).parent.mkdir(mode=0o700, exist_ok=True)
            atomic_write(self._root / rel, data, mode=0o600)
        atomic_write(
            self._root / SERVERS_FILE,
            self._renderer.servers(config, self._http_port, self._https_port),
        )
        zone = Zone()
        zone.set_endpoints(endpoint_sets(self.records))
        atomic_write(self._root / ZONE_FILE, zone.text())
        return result
