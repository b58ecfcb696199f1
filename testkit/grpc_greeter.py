"""A real gRPC backend and client for the gRPC tests: helloworld.Greeter/SayHello
(NIC's grpc-upstreams example's helloworld.proto) served by grpcio.

No generated code: the two messages have one string field each (number 1), so
their protobuf wire form is written and read here (tag 0x0a, a varint length,
the UTF-8 bytes). The reply's message is JSON naming the backend and echoing
the request's name and metadata, so a test sees which backend answered and
what reached it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc

SERVICE = "helloworld.Greeter"
METHOD = f"/{SERVICE}/SayHello"


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def encode(text: str) -> bytes:
    """A HelloRequest or HelloReply with field 1 = ``text``."""
    data = text.encode()
    return b"\x0a" + _varint(len(data)) + data if data else b""


def decode(message: bytes) -> str:
    """Field 1 of a HelloRequest or HelloReply ("" when absent)."""
    i = 0
    while i < len(message):
        tag = message[i]
        i += 1
        length = shift = 0
        while True:
            byte = message[i]
            i += 1
            length |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        if tag == 0x0A:
            return message[i : i + length].decode()
        i += length
    return ""


class Greeter:
    """A grpcio server on 127.0.0.1 (plain, or TLS with ``certificate``: a
    (key PEM, certificate PEM) pair; ``client_ca``: client certificates from
    that authority required)."""

    def __init__(
        self,
        name: str,
        certificate: tuple[bytes, bytes] | None = None,
        client_ca: bytes | None = None,
    ) -> None:
        self.name = name
        self.address = "127.0.0.1"
        self.calls = 0
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        handler = grpc.method_handlers_generic_handler(
            SERVICE,
            {
                "SayHello": grpc.unary_unary_rpc_method_handler(
                    self._say_hello, request_deserializer=decode, response_serializer=encode
                ),
                # grpc-go's helloworld.proto has it too: the same answer, so
                # a test tells routes by method (GRPCRoute's method matches).
                "SayHelloAgain": grpc.unary_unary_rpc_method_handler(
                    self._say_hello, request_deserializer=decode, response_serializer=encode
                ),
                # Not in helloworld.proto: a server stream, one reply per word.
                "SayHellos": grpc.unary_stream_rpc_method_handler(
                    self._say_hellos, request_deserializer=decode, response_serializer=encode
                ),
            },
        )
        self.server.add_generic_rpc_handlers((handler,))
        if certificate is None:
            self.port = self.server.add_insecure_port("127.0.0.1:0")
        else:
            credentials = grpc.ssl_server_credentials(
                [certificate], root_certificates=client_ca, require_client_auth=bool(client_ca)
            )
            self.port = self.server.add_secure_port("127.0.0.1:0", credentials)
        self.server.start()

    def _say_hello(self, name: str, context: grpc.ServicerContext) -> str:
        self.calls += 1
        if name.startswith("sleep "):  # "sleep <seconds>": a slow answer
            time.sleep(float(name.split()[1]))
        metadata = {k: v for k, v in context.invocation_metadata() if isinstance(v, str)}
        # The client certificate's common name, when one was presented.
        client = [v.decode() for v in context.auth_context().get("x509_common_name", [])]
        answer = {"name": self.name, "message": f"Hello {name}", "metadata": metadata}
        return json.dumps({**answer, "client": client})

    def _say_hellos(self, names: str, context: grpc.ServicerContext) -> Iterator[str]:
        for name in names.split():
            yield f"Hello {name}"

    def close(self) -> None:
        self.server.stop(grace=None)


def say_hello(
    port: int,
    authority: str,
    root_certificate: bytes,
    name: str = "ferryman",
    address: str = "127.0.0.1",
) -> dict[str, Any]:
    """One unary SayHello through NGINX's HTTPS port (TLS with ALPN h2, SNI and
    :authority ``authority``) on ``address``; raises grpc.RpcError for a
    non-OK status."""
    credentials = grpc.ssl_channel_credentials(root_certificates=root_certificate)
    options = [
        ("grpc.ssl_target_name_override", authority),
        ("grpc.default_authority", authority),
    ]
    with grpc.secure_channel(f"{address}:{port}", credentials, options=options) as channel:
        call = channel.unary_unary(METHOD, request_serializer=encode, response_deserializer=decode)
        reply: str = call(name, timeout=10)
    answer: dict[str, Any] = json.loads(reply)
    return answer


def say_hellos(port: int, authority: str, root_certificate: bytes, names: str) -> list[str]:
    """The replies of a server-streaming SayHellos (one per word of ``names``)."""
    credentials = grpc.ssl_channel_credentials(root_certificates=root_certificate)
    options = [
        ("grpc.ssl_target_name_override", authority),
        ("grpc.default_authority", authority),
    ]
    with grpc.secure_channel(f"127.0.0.1:{port}", credentials, options=options) as channel:
        call = channel.unary_stream(
            f"/{SERVICE}/SayHellos", request_serializer=encode, response_deserializer=decode
        )
        return list(call(names, timeout=10))


def status_of(
    port: int, authority: str, root_certificate: bytes, name: str = "ferryman"
) -> tuple[grpc.StatusCode, str]:
    """The status code and details of a SayHello that fails."""
    try:
        say_hello(port, authority, root_certificate, name)
    except grpc.RpcError as e:
        return e.code(), e.details() or ""
    raise AssertionError("the call succeeded")


def call_h2c(
    address: str,
    port: int,
    authority: str,
    method: str = METHOD,
    name: str = "ferryman",
    metadata: tuple[tuple[str, str], ...] = (),
) -> tuple[grpc.StatusCode, str]:
    """One unary call over HTTP/2 without TLS (h2c with prior knowledge, as the
    Gateway API's conformance suite calls an HTTP listener), ``:authority``
    ``authority``: the status code and the name of the Greeter that answered
    (its JSON's ``name``; "" when the call failed)."""
    options = [("grpc.default_authority", authority)]
    with grpc.insecure_channel(f"{address}:{port}", options=options) as channel:
        call = channel.unary_unary(method, request_serializer=encode, response_deserializer=decode)
        try:
            reply: str = call(name, timeout=10, metadata=metadata)
        except grpc.RpcError as e:
            return e.code(), ""
    return grpc.StatusCode.OK, str(json.loads(reply)["name"])
