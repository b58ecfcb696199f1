"""The test kubelet's container logs, kept and served the way a kubelet does.

A kubelet keeps each container's stdout and stderr in CRI's log format (one
line each: ``<RFC3339Nano time> <stream> F <text>``) and serves them on its
HTTPS port at ``/containerLogs/<namespace>/<pod>/<container>``; the API
server's ``pods/log`` subresource proxies there (to the Node's address and
``status.daemonEndpoints.kubeletEndpoint.Port``). Gateway API's mirror tests
read echo-basic's request lines that way, with ``sinceTime``.

Here a pod is one process, so every container of a pod shares one log.
Query parameters served: ``sinceTime``, ``sinceSeconds``, ``tailLines``,
``limitBytes``, ``timestamps`` and ``follow`` (until the pod's process ends
or the reader goes away); ``previous`` finds nothing (no restarts here).
"""

from __future__ import annotations

import ctypes
import datetime
import ipaddress
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO, Any
from urllib.parse import parse_qs, unquote, urlsplit

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

CLONE_NEWNET = 0x40000000  # linux/sched.h (os.setns is Python 3.12+)
_libc = ctypes.CDLL(None, use_errno=True)


class ContainerLog:
    """One pod's log file in CRI's format; writers are the pod's stream readers."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._file = path.open("a", encoding="utf-8")
        self.closed = threading.Event()

    def write(self, stream: str, line: str) -> None:
        now = datetime.datetime.now(datetime.UTC)
        stamp = now.strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"  # RFC3339Nano, as CRI writes
        with self._lock:
            self._file.write(f"{stamp} {stream} F {line.rstrip(chr(10))}\n")
            self._file.flush()

    def copy(self, stream: str, source: IO[str]) -> None:
        """Copies ``source`` line by line until it ends."""
        for line in source:
            self.write(stream, line)

    def close(self) -> None:
        with self._lock:
            self._file.close()
        self.closed.set()


def _parse_line(raw: str) -> tuple[datetime.datetime, str, str] | None:
    stamp, _, rest = raw.partition(" ")
    _stream, _, rest = rest.partition(" ")
    _tag, _, text = rest.partition(" ")
    try:
        # Python parses microseconds: drop the nanoseconds' last three digits.
        when = datetime.datetime.fromisoformat(stamp[:26] + "+00:00")
    except ValueError:
        return None
    return when, stamp, text.rstrip("\n")


def _since(query: dict[str, list[str]]) -> datetime.datetime | None:
    if t := query.get("sinceTime"):
        return datetime.datetime.fromisoformat(t[0].replace("Z", "+00:00"))
    if s := query.get("sinceSeconds"):
        return datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=int(s[0]))
    return None


def render(log: ContainerLog, query: dict[str, list[str]]) -> Iterator[bytes]:
    """The log's lines as a kubelet answers ``query`` (follow included)."""
    since = _since(query)
    timestamps = (query.get("timestamps") or ["false"])[0] == "true"
    tail = int(query["tailLines"][0]) if "tailLines" in query else None
    budget = int(query["limitBytes"][0]) if "limitBytes" in query else None
    follow = (query.get("follow") or ["false"])[0] == "true"

    def pick(raw: str) -> bytes | None:
        parsed = _parse_line(raw)
        if parsed is None or (since is not None and parsed[0] < since):
            return None
        return ((f"{parsed[1]} " if timestamps else "") + parsed[2] + "\n").encode()

    with log.path.open(encoding="utf-8") as f:
        lines = [b for raw in f.readlines() if raw.endswith("\n") and (b := pick(raw))]
        if tail is not None:
            lines = lines[-tail:] if tail > 0 else []
        for chunk in lines:
            if budget is not None:
                if budget <= 0:
                    return
                chunk, budget = chunk[:budget], budget - len(chunk)
            yield chunk
        while follow:
            pending = f.readline()
            if pending:
                if (chunk := pick(pending)) is not None:
                    yield chunk
            elif log.closed.is_set():
                return
            else:
                time.sleep(0.1)


def self_signed(directory: Path, address: str) -> tuple[Path, Path]:
    """A serving certificate for ``address`` (the API server does not check a
    kubelet's certificate unless given ``--kubelet-certificate-authority``)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"kubelet@{address}")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=7))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(address))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "kubelet.crt", directory / "kubelet.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def _listen_in(netns: str, address: str) -> socket.socket:
    """A listening socket in network namespace ``netns`` (setns is per thread:
    a short-lived thread enters it, and the socket stays in it)."""
    out: list[socket.socket | BaseException] = []

    def enter() -> None:
        try:
            with Path(f"/run/netns/{netns}").open() as ns:
                if _libc.setns(ns.fileno(), CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), "setns")
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((address, 0))
            sock.listen(64)
            out.append(sock)
        except BaseException as e:  # handed to the caller
            out.append(e)

    t = threading.Thread(target=enter, name="kubelet-netns")
    t.start()
    t.join()
    if isinstance(out[0], BaseException):
        raise out[0]
    return out[0]


class LogServer:
    """The kubelet's HTTPS endpoint, serving ``/containerLogs`` only."""

    def __init__(
        self, netns: str, address: str, workdir: Path, find: Callable[[str], ContainerLog | None]
    ) -> None:
        cert, key = self_signed(workdir, address)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        server = ThreadingHTTPServer((address, 0), _Handler, bind_and_activate=False)
        server.socket.close()
        server.socket = context.wrap_socket(_listen_in(netns, address), server_side=True)
        server.daemon_threads = True
        server.find = find  # type: ignore[attr-defined]
        self._server = server
        self.port: int = server.socket.getsockname()[1]
        self._thread = threading.Thread(
            target=server.serve_forever, daemon=True, name="kubelet-logs"
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        parts = [unquote(p) for p in url.path.split("/") if p]
        if len(parts) != 4 or parts[0] != "containerLogs":
            self._plain(404, "not found\n")
            return
        query = parse_qs(url.query)
        log = self.server.find(f"{parts[1]}/{parts[2]}")  # type: ignore[attr-defined]
        if log is None or query.get("previous") == ["true"]:
            self._plain(404, f'pod "{parts[2]}" has no logs here\n')
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for chunk in render(log, query):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            self.close_connection = True

    def _plain(self, code: int, text: str) -> None:
        body = text.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass
