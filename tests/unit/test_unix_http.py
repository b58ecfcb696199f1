"""The data plane's unix-socket HTTP client and the probe server (both h11
over asyncio's streams since issue 31), against servers of a few lines."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from ferryman.dataplane import unix_http
from ferryman.observability.metrics import Metrics
from ferryman.observability.probes import ProbeServer

Reply = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def _ask(tmp_path: Path, reply: Reply, method: str = "GET", body: bytes = b"") -> tuple[int, str]:
    path = tmp_path / "s.sock"
    seen: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await reader.readuntil(b"\r\n\r\n"))
        await reply(reader, writer)
        writer.close()

    async def scenario() -> tuple[int, str]:
        server = await asyncio.start_unix_server(handle, str(path))
        async with server:
            return await unix_http.request(path, method, "/push", body, timeout=2)

    answer = asyncio.run(scenario())
    assert seen[0].startswith(f"{method} /push HTTP/1.1\r\n".encode())
    return answer


def _text(data: bytes) -> Reply:
    async def reply(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(data)
        await writer.drain()

    return reply


def test_an_answer_with_a_length_and_one_in_chunks_read_whole(tmp_path: Path) -> None:
    fixed = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n4 1"
    assert _ask(tmp_path, _text(fixed)) == (200, "4 1")
    # NGINX's Lua answers HTTP/1.1 in chunks when it gives no length.
    head = b"HTTP/1.1 409 Conflict\r\nTransfer-Encoding: chunked\r\n\r\n"
    chunked = head + b"2\r\nno\r\n1\r\n!\r\n0\r\n\r\n"
    assert _ask(tmp_path, _text(chunked)) == (409, "no!")


def test_a_body_is_sent_with_its_length(tmp_path: Path) -> None:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        got = await reader.readexactly(5)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n" + got)
        await writer.drain()

    assert _ask(tmp_path, echo, "POST", b"hello") == (200, "hello")


def test_no_answer_is_an_oserror_or_a_timeout(tmp_path: Path) -> None:
    with pytest.raises(ConnectionError):  # closed before the answer's end
        _ask(tmp_path, _text(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nab"))
    with pytest.raises(ConnectionError):  # not HTTP
        _ask(tmp_path, _text(b"SSH-2.0-OpenSSH\r\n\r\n"))
    with pytest.raises(OSError):  # nobody there
        asyncio.run(unix_http.request(tmp_path / "none.sock", "GET", "/"))

    async def silent(reader: asyncio.StreamReader, _: asyncio.StreamWriter) -> None:
        await asyncio.sleep(5)

    path = tmp_path / "slow.sock"

    async def slow() -> None:
        async with await asyncio.start_unix_server(silent, str(path)):
            await unix_http.request(path, "GET", "/", timeout=0.1)

    with pytest.raises(TimeoutError):
        asyncio.run(slow())


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _get(port: int, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    answer = await reader.read()  # the server closes after one answer
    writer.close()
    return answer


def test_the_probe_server_answers_its_paths_and_only_those() -> None:
    ready_port, metrics_port = _port(), _port()
    ready = [False]

    async def counters() -> dict[str, int] | None:
        return None

    async def scenario() -> list[bytes]:
        probes = ProbeServer(ready_port, metrics_port, Metrics(), lambda: ready[0], counters)
        await probes.start()
        try:
            answers = [await _get(ready_port, b"GET /nginx-ready HTTP/1.1\r\nHost: x\r\n\r\n")]
            ready[0] = True
            for port, request in (
                (ready_port, b"GET /nginx-ready?x=1 HTTP/1.1\r\nHost: x\r\n\r\n"),
                (ready_port, b"HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n"),
                (ready_port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
                (ready_port, b"POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"),
                (metrics_port, b"GET /metrics HTTP/1.0\r\n\r\n"),
                (ready_port, b"nonsense\r\n\r\n"),
            ):
                answers.append(await _get(port, request))
            return answers
        finally:
            await probes.stop()

    answers = asyncio.run(scenario())
    heads = [a.partition(b"\r\n")[0] for a in answers]
    assert heads == [
        b"HTTP/1.1 503 Service Unavailable",
        b"HTTP/1.1 200 OK",
        b"HTTP/1.1 200 OK",
        b"HTTP/1.1 404 Not Found",
        b"HTTP/1.1 405 Method Not Allowed",
        b"HTTP/1.1 200 OK",
        b"",  # not HTTP: closed unanswered
    ]
    assert answers[1].endswith(b"\r\n\r\nReady\n")
    assert answers[2].endswith(b"\r\n\r\n")  # HEAD: the headers alone
    assert b'\nnginx_ingress_nginx_up{class="ferryman"} 0.0\n' in answers[5]
