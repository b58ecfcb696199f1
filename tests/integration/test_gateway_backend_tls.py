"""BackendTLSPolicy in manifests mode through real NGINX and real TLS
backends: a Service a policy targets is spoken to in TLS, its certificate
verified against the policy's ConfigMap CAs and its hostname (or, with
subjectAltNames, one of those instead); what fails verification is a 502, a
policy without a usable CA a 500; a policy or ConfigMap change is a push,
never a reload."""

from __future__ import annotations

import contextlib
import datetime
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from testkit.egress import _client_secret, client_cert_backend, ok_backend
from testkit.gateway_docs import gateway, gateway_class, get_at, route, to
from testkit.harness import Backends, Ferryman, eventually, free_port, service_with_backends
from testkit.pki import authority

ADDRESS = "127.0.0.10"
HOST = "btls.example.com"
URI = "spiffe://abc.example.com/test-identity"


def _server_pem(tmp: Path, ca: str, name: str, uri: str | None = None) -> ssl.SSLContext:
    """A server context with a certificate of ``authority(ca)`` for ``name``
    (a DNS SAN) and, when given, a URI SAN."""
    issuer = authority(ca)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    sans: list[x509.GeneralName] = [x509.DNSName(name)]
    if uri:
        sans.append(x509.UniformResourceIdentifier(uri))
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(issuer.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .sign(issuer.key, hashes.SHA256())
    )
    crt, pem_key = tmp / f"{ca}-{name}.crt", tmp / f"{ca}-{name}.key"
    crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    pem_key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(crt, pem_key)
    return ctx


def _ca_map(name: str, ca: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
        "data": {"ca.crt": authority(ca).cert_pem.decode()},
    }


def _policy(
    name: str, service: str, ca_map: str, hostname: str, sans: list[dict[str, str]] | None = None
) -> dict[str, Any]:
    validation: dict[str, Any] = {
        "caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": ca_map}],
        "hostname": hostname,
    }
    if sans:
        validation["subjectAltNames"] = sans
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "BackendTLSPolicy",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "targetRefs": [{"group": "", "kind": "Service", "name": service}],
            "validation": validation,
        },
    }


@contextlib.contextmanager
def _tls_backends(tmp: Path) -> Iterator[dict[str, Any]]:
    """The backends: ``good`` btls-ca's for abc.example.com (and the URI
    SAN), ``other`` another CA's for the same name."""
    with (
        ok_backend(_server_pem(tmp, "btls-ca", "abc.example.com", URI)) as good,
        ok_backend(_server_pem(tmp, "btls-other-ca", "abc.example.com")) as other,
    ):
        yield {"good": good, "other": other}


def _url_of(path: str) -> dict[str, Any]:
    return to(path.strip("/"), path, "Exact")


@pytest.mark.flavours("nginx", "nginx-1.30", "angie")
def test_backend_tls_policy_verifies_without_reloads(
    ferryman: Ferryman, backends: Backends, tmp_path: Path
) -> None:
    port = free_port()
    with _tls_backends(tmp_path) as peers:
        services = {
            "ok": peers["good"],
            "wrongca": peers["other"],
            "hostmismatch": peers["good"],
            "sanuri": peers["good"],
            "sanhost": peers["good"],
            "sanmismatch": peers["good"],
            "nomap": peers["good"],
        }
        for name, peer in services.items():
            ferryman.write(f"svc-{name}", service_with_backends(name, [peer]))
        ferryman.write("svc-plain", service_with_backends("plain", [backends.start("plain")]))
        ferryman.write("class", gateway_class())
        ferryman.write("gw", gateway("gw", [{"name": "http", "port": port, "protocol": "HTTP"}]))
        ferryman.write(
            "route",
            route("r", "gw", [HOST], [_url_of(f"/{n}") for n in [*services, "plain"]]),
        )
        ferryman.write("ca", _ca_map("ca", "btls-ca"))
        policies = [
            _policy("ok", "ok", "ca", "abc.example.com"),
            _policy("wrongca", "wrongca", "ca", "abc.example.com"),
            _policy("hostmismatch", "hostmismatch", "ca", "mismatch.example.com"),
            # With SANs the hostname is the SNI name only: one SAN must match.
            _policy("sanuri", "sanuri", "ca", "other.example.com", [{"type": "URI", "uri": URI}]),
            _policy("sanhost", "sanhost", "ca", "other.example.com",
                    [{"type": "URI", "uri": "spiffe://x/y"},
                     {"type": "Hostname", "hostname": "abc.example.com"}]),
            _policy("sanmismatch", "sanmismatch", "ca", "abc.example.com",
                    [{"type": "Hostname", "hostname": "dce.example.com"}]),
            _policy("nomap", "nomap", "missing", "abc.example.com"),
            _policy("plain", "plain", "ca", "abc.example.com"),
        ]  # fmt: skip
        ferryman.write("policies", *policies)
        ferryman.extra_args += ["--enable-gateway-api", "--gateway-addresses", ADDRESS]
        ferryman.start()

        def at(path: str) -> str:
            r = get_at(ADDRESS, port, HOST, path)
            return (r.served_by or r.text) if r.status == 200 else str(r.status)

        eventually(lambda: at("/ok") == "ok", 60, "the TLS backend verified")
        assert at("/wrongca") == "502"  # another CA signed it
        assert at("/hostmismatch") == "502"  # its certificate is not mismatch.example.com's
        assert at("/sanuri") == "ok"
        assert at("/sanhost") == "ok"
        assert at("/sanmismatch") == "502"
        assert at("/nomap") == "500"  # no valid CA certificate: the policy is not accepted
        assert at("/plain") == "502"  # a plain HTTP backend does not speak TLS
        reloads = ferryman.reloads()

        # The CA ConfigMap now holds the other CA: the verdicts turn.
        ferryman.write("ca", _ca_map("ca", "btls-other-ca"))
        eventually(lambda: at("/wrongca") == "ok", what="the ConfigMap's new CA")
        assert at("/ok") == "502"
        # The ConfigMap a policy missed appears.
        ferryman.write("ca2", _ca_map("missing", "btls-ca"))
        eventually(lambda: at("/nomap") == "ok", what="the missing ConfigMap")
        # Policies removed: plain HTTP again.
        ferryman.write("policies", *[p for p in policies if p["metadata"]["name"] != "plain"])
        eventually(lambda: at("/plain") == "plain", what="the policy removed")
        assert ferryman.reloads() == reloads


@pytest.mark.flavours("nginx", "nginx-1.30", "angie")
def test_gateway_presents_its_backend_client_certificate(
    ferryman: Ferryman, tmp_path: Path
) -> None:
    """GatewayBackendClientCertificate: a backend that asks for a client
    certificate gets the Gateway's (spec.tls.backend.clientCertificateRef);
    without one its handshake fails; adding the reference is a push."""
    port = free_port()
    listener = [{"name": "http", "port": port, "protocol": "HTTP"}]
    with client_cert_backend(tmp_path) as (peer, seen):
        ferryman.write("svc", service_with_backends("secure", [peer]))
        ferryman.write("class", gateway_class())
        ferryman.write("gw", gateway("gw", listener))
        ferryman.write("route", route("r", "gw", [HOST], [to("secure")]))
        ferryman.write("ca", _ca_map("ca", "backend-ca"))
        ferryman.write("policy", _policy("p", "secure", "ca", "secure-app.example.com"))
        ferryman.write("client", _client_secret("client", "gateway-client"))
        ferryman.extra_args += ["--enable-gateway-api", "--gateway-addresses", ADDRESS]
        ferryman.start()

        def at() -> int:
            return get_at(ADDRESS, port, HOST).status

        eventually(lambda: at() == 502, 60, "the backend refusing no certificate")
        reloads = ferryman.reloads()
        backend = {"clientCertificateRef": {"name": "client"}}
        ferryman.write("gw", gateway("gw", listener, tls={"backend": backend}))
        eventually(lambda: at() == 200, what="the Gateway's client certificate")
        assert seen.client[-1] == "gateway-client"
        assert ferryman.reloads() == reloads
