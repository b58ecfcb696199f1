"""Upstream latency from NGINX's access log, sent as syslog to a unix socket.

NGINX writes one line per proxied request (``log_format ferryman_latency`` in
nginx.conf): virtual host, backend key, upstream address, status and response
time. After retries those last three are comma-separated lists; the final
attempt is the one that answered, and the one measured.

Each sample becomes a histogram series, so whoever can write to the socket
decides how large /metrics grows. The socket is writable by NGINX's workers
only (their group, or ferryman's own user when they keep it); a sample counts
only when its virtual host, backend and peer are ones ferryman routes to; and
the number of series is capped (``MAX_SERIES``).
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import re
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from ferryman.observability.metrics import Metrics
from ferryman.resources.meta import ObjectRef

log = logging.getLogger("ferryman.latency")

# A series is ~4 KB of /metrics (13 buckets): 5,000 of them is 20 MB a scrape,
# as much as is sane to scrape every few seconds, and above what 1,000 routed
# hosts with a few pods each and a couple of status codes need.
MAX_SERIES = 5_000
# When the cap is reached, series of peers and hosts that are gone are dropped
# to make room, at most this often (seconds): a scan checks every series.
PRUNE_INTERVAL = 10.0

_ATTEMPTS = re.compile(r" ?[,:] ")

# (virtual host, backend, server) -> the resource serving it, or None when
# ferryman does not route that host to that peer of that backend.
OwnerOf = Callable[[str, str, str], ObjectRef | None]
# (backend, server) -> the name of the pod at that peer ("": not known).
PodOf = Callable[[str, str], str]


class Sample(NamedTuple):
    vhost: str
    backend: str
    server: str
    code: str
    milliseconds: float


def parse(datagram: bytes) -> Sample | None:
    """One syslog datagram (``<PRI>TIMESTAMP tag: message``) as a sample."""
    text = datagram.decode(errors="replace")
    _, sep, message = text.partition("ferryman: ")
    # NGINX separates the attempts in a list with ", " (and upstream groups of an
    # internal redirect with " : "): one comma each, so a space ends a field.
    fields = _ATTEMPTS.sub(",", message).split(" ") if sep else []
    if len(fields) != 5:
        return None
    vhost, backend, servers, codes, times = fields
    last = [v.rsplit(",", 1)[-1].strip() for v in (servers, codes, times)]
    try:
        ms = float(last[2]) * 1000
    except ValueError:  # "-": no upstream answered
        return None
    code = last[1]
    if not (len(code) == 3 and code.isdigit() and math.isfinite(ms) and ms >= 0):
        return None
    return Sample(vhost, backend, last[0], code, ms)


Labels = tuple[str, str, str, str, str, str, str, str]


class LatencyReceiver(asyncio.DatagramProtocol):
    def __init__(
        self,
        path: Path,
        metrics: Metrics,
        owner_of: OwnerOf,
        max_series: int = MAX_SERIES,
        pod_of: PodOf = lambda backend, server: "",
    ) -> None:
        self._path = path
        self._metrics = metrics
        self._owner_of = owner_of
        self._pod_of = pod_of
        self._max_series = max_series
        # Every series made, with the (host, backend, server) it measures.
        self._series: dict[Labels, tuple[str, str, str]] = {}
        self._pruned_at = -math.inf

    def datagram_received(self, data: bytes, addr: object) -> None:
        sample = parse(data)
        if sample is None:  # also a request no upstream answered ("-")
            return
        where = (sample.vhost, sample.backend, sample.server)
        owner = self._owner_of(*where)
        if owner is None:
            self._drop("unknown")
            return
        service = sample.backend.partition("/")[2].partition(":")[0]
        labels: Labels = (
            sample.backend,
            sample.server,
            sample.code,
            service,
            owner.kind.lower(),
            owner.name,
            owner.namespace,
            # NIC's peer label: the pod behind the address (its EndpointSlice's
            # targetRef); a pod replaced at the same address is a new series.
            self._pod_of(sample.backend, sample.server),
        )
        if labels not in self._series:
            if len(self._series) >= self._max_series and not self._prune():
                self._drop("series_limit")
                return
            self._series[labels] = where
        self._metrics.upstream_latency.labels(*labels).observe(sample.milliseconds)

    def _prune(self) -> bool:
        """Drops the series of what is no longer routed; True when that made room."""
        now = time.monotonic()
        if now - self._pruned_at < PRUNE_INTERVAL:
            return False
        self._pruned_at = now
        for labels, where in list(self._series.items()):
            if self._owner_of(*where) is None:
                self._metrics.upstream_latency.remove(*labels)
                del self._series[labels]
        if len(self._series) < self._max_series:
            return True
        log.warning(
            "latency series limit reached; samples for new series are dropped",
            extra={"fields": {"series": len(self._series)}},
        )
        return False

    def _drop(self, reason: str) -> None:
        self._metrics.latency_samples_dropped.labels(reason=reason).inc()

    def bind(self, worker_gid: int | None) -> None:
        """Create the socket before NGINX starts logging to it.

        ``worker_gid``: NGINX's workers run as another user, in this group; only
        they may write (0620). None: they are ferryman's own user (0600).
        """
        self._path.unlink(missing_ok=True)
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        # Created under the umask (no write for others), then opened to the workers.
        self._sock.bind(str(self._path))
        if worker_gid is None:
            self._path.chmod(0o600)
        else:
            os.chown(self._path, -1, worker_gid)
            self._path.chmod(0o620)

    async def run(self) -> None:
        transport, _ = await asyncio.get_running_loop().create_datagram_endpoint(
            lambda: self, sock=self._sock
        )
        try:
            await asyncio.Event().wait()
        finally:
            transport.close()
            self._path.unlink(missing_ok=True)
