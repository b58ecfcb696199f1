"""Counting the new TCP connections a backend accepts (the termination and rollout tests).

Moved from tests/integration/test_termination.py, whose tests and others share them."""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field


@dataclass
class NewConnections:
    """GET requests for one host, each on a new connection, from a few threads:
    (seconds since ``t0``, outcome) where the outcome is the answering backend's
    name, another status, or the error (``ConnectionRefusedError``)."""

    port: int
    host: str
    threads: int = 3
    t0: float = field(default_factory=time.monotonic)
    outcomes: list[tuple[float, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._workers = [threading.Thread(target=self._loop) for _ in range(self.threads)]
        for t in self._workers:
            t.start()

    def _one(self) -> str:
        request = f"GET / HTTP/1.1\r\nHost: {self.host}\r\nConnection: close\r\n\r\n"
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=10) as s:
                s.sendall(request.encode())
                answer = b""
                while chunk := s.recv(65536):
                    answer += chunk
        except OSError as e:
            return type(e).__name__
        head, _, body = answer.partition(b"\r\n\r\n")
        status = head.split(b" ")[1].decode() if head.startswith(b"HTTP/") else "garbled"
        if status != "200":
            return status
        return str(json.loads(body)["name"])

    def _loop(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            outcome = self._one()
            with self._lock:
                self.outcomes.append((started - self.t0, outcome))
            self._stop.wait(0.01)

    def stop(self) -> list[tuple[float, str]]:
        self._stop.set()
        for t in self._workers:
            t.join()
        return sorted(self.outcomes)
