"""ingress-nginx's proxy-request-buffering through real NGINX and a real backend:
"off" proxies the request body as it arrives (the slow path's
@ferryman_streamed_* locations), "on" (the default) reads all of it first; an
edit switches between them without a reload."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx

from testkit.annotated_ingress import HOST, annotated, last
from testkit.harness import Backend, Backends, Ferryman, eventually, service_with_backends

P = "nginx.ingress.kubernetes.io/"


def _reached_before_the_body_ends(f: Ferryman, b: Backend) -> bool:
    """Whether the backend got the request while the client still held back the
    second half of its body (then sent; the backend echoes all of it)."""
    go_on = threading.Event()
    answers: list[httpx.Response] = []

    def body() -> Iterator[bytes]:
        yield b"first"
        go_on.wait(10)
        yield b"-last"

    def send() -> None:
        with httpx.Client(timeout=30) as c:
            headers = {"Host": HOST, "Content-Length": "10"}
            answers.append(
                c.post(f"http://127.0.0.1:{f.http_port}/", headers=headers, content=body())
            )

    before = b.hits
    t = threading.Thread(target=send)
    t.start()
    deadline = time.monotonic() + 2  # NGINX passes a streamed body on at once
    while b.hits == before and time.monotonic() < deadline:
        time.sleep(0.02)
    reached = b.hits > before
    go_on.set()
    t.join(30)
    assert answers[0].status_code == 200
    assert answers[0].json()["body"] == "first-last"
    return reached


def test_request_buffering_off_streams_the_body_and_on_reads_it_first(
    ferryman: Ferryman, backends: Backends
) -> None:
    f = ferryman
    b = backends.start("a")
    f.write("svc", service_with_backends("app", [b]))
    f.write("doc0", annotated({P + "proxy-request-buffering": "off"}))
    f.start()
    assert last(f)["reason"] == "AddedOrUpdated"
    assert _reached_before_the_body_ends(f, b)
    f.write("doc0", annotated({P + "proxy-request-buffering": "on"}))
    eventually(lambda: not _reached_before_the_body_ends(f, b), 60, "the body read first")
    assert f.reloads() == 1
