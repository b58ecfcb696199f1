"""The webhook's certificate: made (a CA and a serving certificate it signed), read
back from a Secret's data, and served: a client trusting only the CA completes a
handshake for each host, as the API server does with the caBundle."""

from __future__ import annotations

import asyncio
import base64
import ssl

import pytest

from ferryman.webhook.certificate import CertificateError, from_secret_data, generate


async def _handshake(server: ssl.SSLContext, ca: bytes, host: str) -> None:
    """A real TLS handshake over loopback; raises ssl.SSLError when it fails."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    listener = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=server)
    port = listener.sockets[0].getsockname()[1]
    client = ssl.create_default_context(cadata=ca.decode())
    try:
        _, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=client, server_hostname=host
        )
        writer.close()
    finally:
        listener.close()
        await listener.wait_closed()


def test_a_made_certificate_is_trusted_through_its_ca_for_every_host() -> None:
    bundle = generate(["ferryman-webhook.ferryman.svc", "127.0.0.1"])
    context = bundle.ssl_context()
    for host in ("ferryman-webhook.ferryman.svc", "127.0.0.1"):
        asyncio.run(_handshake(context, bundle.ca, host))
    with pytest.raises(ssl.SSLCertVerificationError):
        asyncio.run(_handshake(context, bundle.ca, "other.ferryman.svc"))
    # Another CA is not trusted: the caBundle must be this one.
    with pytest.raises(ssl.SSLCertVerificationError):
        asyncio.run(_handshake(context, generate(["x"]).ca, "127.0.0.1"))


def test_secret_data_round_trips() -> None:
    bundle = generate(["a.b.svc"])
    data = bundle.secret_data()
    assert sorted(data) == ["ca.crt", "tls.crt", "tls.key"]
    assert from_secret_data(data) == bundle


def test_without_ca_crt_the_last_certificate_of_the_chain_is_trusted() -> None:
    """A self-signed certificate (its own CA), or a chain ending at its root."""
    bundle = generate(["a.b.svc"])
    chain = bundle.cert + bundle.ca
    data = {"tls.crt": base64.b64encode(chain).decode(), "tls.key": bundle.secret_data()["tls.key"]}
    read = from_secret_data(data)
    assert read.ca == bundle.ca
    asyncio.run(_handshake(read.ssl_context(), read.ca, "a.b.svc"))


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"tls.key": None}, "no tls.crt and tls.key"),
        ({"tls.crt": "not base64!"}, "tls.crt is not base64"),
        ({"tls.crt": base64.b64encode(b"no pem").decode(), "ca.crt": None}, "no PEM"),
        ({"tls.key": generate(["x"]).secret_data()["tls.key"]}, "do not load"),
    ],
)
def test_unusable_secret_data_is_refused(change: dict[str, str | None], says: str) -> None:
    data: dict[str, str] = dict(generate(["a.b.svc"]).secret_data())
    for key, value in change.items():
        if value is None:
            data.pop(key)
        else:
            data[key] = value
    with pytest.raises(CertificateError, match=says):
        from_secret_data(data).ssl_context()
