"""A real HTTP/2 backend without TLS (h2c with prior knowledge) for the
tests of HTTPRoute backends whose Service port's appProtocol is
kubernetes.io/h2c: each request is answered 200 with JSON naming the backend
and echoing what reached it (method, path, authority, headers, body, and the
protocol, "HTTP/2.0"). A connection that does not start with HTTP/2's
preface is answered ``400 Expected h2c request`` over HTTP/1.1, as the Gateway
API's echo-basic answers on its h2c port, so a test sees a backend reached
over HTTP/1.1.

Written with the ``h2`` library (hyper-h2), the sans-I/O HTTP/2 state machine
httpx uses: in the lock file already (lightkube's httpx2[http2]) and named in
the dev group, as the tests import it themselves.
"""

from __future__ import annotations

import json
import socket
import threading
from typing import Any

import h2.config
import h2.connection
import h2.events

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


class H2cEcho:
    """An h2c server on 127.0.0.1 (a free port), one thread per connection."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.address = "127.0.0.1"
        self.hits = 0  # requests answered over HTTP/2
        self.refused = 0  # connections that spoke anything else
        self._sock = socket.create_server((self.address, 0))
        self.port = int(self._sock.getsockname()[1])
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._closed = True
        self._sock.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                first = _read_exactly(conn, len(PREFACE))
                if first != PREFACE:
                    self.refused += 1
                    while b"\r\n\r\n" not in first and len(first) < 65536:
                        chunk = conn.recv(65536)  # the request's head, read whole
                        if not chunk:
                            break
                        first += chunk
                    body = b"Expected h2c request"
                    conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: %d\r\n"
                                 b"Connection: close\r\n\r\n%s" % (len(body), body))  # fmt: skip
                    return
                self._http2(conn, first)
            except OSError:
                return

    def _http2(self, conn: socket.socket, first: bytes) -> None:
        config = h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
        h2c = h2.connection.H2Connection(config=config)
        h2c.initiate_connection()
        conn.sendall(h2c.data_to_send())
        streams: dict[int, dict[str, Any]] = {}
        data = first
        while data:
            for event in h2c.receive_data(data):
                if isinstance(event, h2.events.RequestReceived):
                    headers = [(str(k), str(v)) for k, v in event.headers or ()]
                    streams[event.stream_id] = {"headers": headers, "body": b""}
                elif isinstance(event, h2.events.DataReceived):
                    streams[event.stream_id]["body"] += event.data or b""
                    h2c.acknowledge_received_data(
                        event.flow_controlled_length or 0, event.stream_id
                    )
                elif isinstance(event, h2.events.StreamEnded):
                    self._answer(h2c, event.stream_id, streams.pop(event.stream_id))
                elif isinstance(event, h2.events.ConnectionTerminated):
                    conn.sendall(h2c.data_to_send())
                    return
            conn.sendall(h2c.data_to_send())
            data = conn.recv(65536)

    def _answer(self, h2c: h2.connection.H2Connection, stream: int, req: dict[str, Any]) -> None:
        self.hits += 1
        pseudo = {k: v for k, v in req["headers"] if k.startswith(":")}
        headers: dict[str, list[str]] = {}
        for k, v in req["headers"]:
            if not k.startswith(":"):
                headers.setdefault(k, []).append(v)
        answer = {
            "name": self.name,
            "protocol": "HTTP/2.0",
            "method": pseudo.get(":method"),
            "path": pseudo.get(":path"),
            "authority": pseudo.get(":authority") or next(iter(headers.get("host", [])), None),
            "headers": headers,
            "body": req["body"].decode(errors="replace"),
        }
        body = json.dumps(answer).encode()
        h2c.send_headers(
            stream,
            [
                (":status", "200"),
                ("content-type", "application/json"),
                ("content-length", str(len(body))),
                ("x-backend", self.name),
            ],
        )
        size = h2c.max_outbound_frame_size
        for i in range(0, len(body), size):
            h2c.send_data(stream, body[i : i + size], end_stream=i + size >= len(body))


def _read_exactly(conn: socket.socket, n: int) -> bytes:
    """``n`` bytes, or fewer when the peer closes first (or sends something
    that cannot be HTTP/2's preface: it differs at its first byte)."""
    out = b""
    while len(out) < n:
        chunk = conn.recv(n - len(out))
        if not chunk:
            break
        out += chunk
        if not PREFACE.startswith(out):
            break
    return out
