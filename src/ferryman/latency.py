"""Upstream latency from NGINX's access log, sent as syslog to a unix socket.

NGINX writes one line per proxied request (``log_format ferryman_latency`` in
nginx.conf): virtual host, backend key, upstream address, status and response
time. After retries those last three are comma-separated lists; the final
attempt is the one that answered, and the one measured.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from ferryman.metrics import Metrics
from ferryman.resources.meta import ObjectRef

log = logging.getLogger("ferryman.latency")


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
    fields = message.split(" ", 4) if sep else []
    if len(fields) != 5:
        return None
    vhost, backend, servers, codes, times = fields
    last = [v.rsplit(",", 1)[-1].strip() for v in (servers, codes, times)]
    try:
        ms = float(last[2]) * 1000
    except ValueError:  # "-": no upstream answered
        return None
    return Sample(vhost, backend, last[0], last[1], ms)


class LatencyReceiver(asyncio.DatagramProtocol):
    def __init__(
        self, path: Path, metrics: Metrics, owner_of: Callable[[str], ObjectRef | None]
    ) -> None:
        self._path = path
        self._metrics = metrics
        self._owner_of = owner_of

    def datagram_received(self, data: bytes, addr: object) -> None:
        sample = parse(data)
        if sample is None:
            return
        owner = self._owner_of(sample.vhost)
        service = sample.backend.partition("/")[2].partition(":")[0]
        self._metrics.upstream_latency.labels(
            upstream=sample.backend,
            server=sample.server,
            code=sample.code,
            service=service,
            resource_type="ingress" if owner else "",
            resource_name=owner.name if owner else "",
            resource_namespace=owner.namespace if owner else "",
        ).observe(sample.milliseconds)

    def bind(self) -> None:
        """Create the socket before NGINX starts logging to it."""
        self._path.unlink(missing_ok=True)
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.bind(str(self._path))
        self._path.chmod(0o622)  # NGINX workers may run as another user

    async def run(self) -> None:
        transport, _ = await asyncio.get_running_loop().create_datagram_endpoint(
            lambda: self, sock=self._sock
        )
        try:
            await asyncio.Event().wait()
        finally:
            transport.close()
            self._path.unlink(missing_ok=True)
