"""A tiny HTTP backend for the cafe demo (standard library only).

Answers every method on every path with a plain-text body naming itself and
echoing what arrived, so one can see which backend answered and which headers
the Ingress controller added::

    python examples/cafe/backend.py --name coffee-1 --port 18101
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SHOWN_HEADERS = ("Host", "X-Forwarded-For", "X-Forwarded-Proto", "X-Real-IP")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as NGINX's upstream keepalive expects
    backend_name = "backend"
    server_version = "cafe-backend"

    def __getattr__(self, name: str) -> Callable[[], None]:
        # BaseHTTPRequestHandler dispatches to do_<METHOD>: answer them all.
        if name.startswith("do_"):
            return self._answer
        raise AttributeError(name)

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        host, port = self.server.server_address[:2]
        lines = [
            f"Server name: {self.backend_name}",
            f"Server address: {host}:{port}",
            f"Method: {self.command}",
            f"URI: {self.path}",
        ]
        lines += [f"{h}: {self.headers.get(h, '')}" for h in SHOWN_HEADERS]
        body = ("\n".join(lines) + "\n").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        sys.stderr.write(f"{self.backend_name}: {self.address_string()} {format % args}\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--name", required=True, help="the name the backend answers with")
    p.add_argument("--port", type=int, required=True, help="TCP port on 127.0.0.1")
    args = p.parse_args(argv)
    handler = type("NamedHandler", (Handler,), {"backend_name": args.name})
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler)
    server.daemon_threads = True
    print(f"{args.name}: listening on 127.0.0.1:{args.port}", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
