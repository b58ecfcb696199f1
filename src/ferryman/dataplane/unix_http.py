"""HTTP to the data plane's own servers on its unix sockets (the version,
status and endpoints sockets): one request per connection, closed after.

h11 frames the messages (HTTP/1.1, no I/O of its own; the Kubernetes client's
HTTP stack brings it) over asyncio's unix streams. aiohttp's client did this
before: importing it is ~130 ms of every start, of which its connector's two
TLS contexts, made at import, ~40 ms, for requests that never leave the
machine (issue 31).

Every failure to get an answer is an ``OSError`` (a connection refused, reset
or closed early, an answer that is not HTTP) or ``TimeoutError``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import h11

_READ = 64 * 1024


async def request(
    socket: Path, method: str, target: str, body: bytes = b"", timeout: float = 2.0
) -> tuple[int, str]:
    """``method`` ``target`` on ``socket``: (status, body as text)."""
    async with asyncio.timeout(timeout):
        reader, writer = await asyncio.open_unix_connection(str(socket))
        try:
            return await _exchange(reader, writer, method, target, body)
        except h11.ProtocolError as e:
            raise ConnectionError(f"{socket}: {e}") from e
        finally:
            writer.close()


async def _exchange(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    method: str,
    target: str,
    body: bytes,
) -> tuple[int, str]:
    conn = h11.Connection(h11.CLIENT)
    headers = [("Host", "nginx"), ("Connection", "close")]
    if method != "GET":
        headers.append(("Content-Length", str(len(body))))
    writer.write(conn.send(h11.Request(method=method, target=target, headers=headers)) or b"")
    if body:
        writer.write(conn.send(h11.Data(data=body)) or b"")
    writer.write(conn.send(h11.EndOfMessage()) or b"")
    await writer.drain()
    status = 0
    chunks: list[bytes] = []
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            conn.receive_data(await reader.read(_READ))  # b"": closed, h11 says if early
        elif isinstance(event, h11.Response):
            status = event.status_code
        elif isinstance(event, h11.Data):
            chunks.append(bytes(event.data))
        elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
            return status, b"".join(chunks).decode("utf-8", "replace")
