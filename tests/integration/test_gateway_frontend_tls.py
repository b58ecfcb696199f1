"""A Gateway's client certificate validation (spec.tls.frontend) in
manifests mode through real NGINX and real TLS clients: on an
AllowValidOnly listener a client with a certificate of the ConfigMap's CA
gets its answer, one without a certificate or with another CA's is refused
in the handshake; an AllowInsecureFallback port (perPort) lets all three
through; a ConfigMap change turns the verdicts with no reload, and a
reference that does not resolve stops the listener, never the others."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from testkit.gateway_docs import gateway, gateway_class, get_at, route, to
from testkit.harness import (
    Backends,
    Ferryman,
    eventually,
    free_port,
    service_with_backends,
    tls_secret,
)
from testkit.mtls import client_context
from testkit.pki import Issued, authority, issue

ADDRESS = "127.0.0.13"
STRICT, FALLBACK = "strict.example.com", "fallback.example.com"


def _ca_map(name: str, ca: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
        "data": {"ca.crt": authority(ca).cert_pem.decode()},
    }


def _validation(ca_map: str, mode: str = "AllowValidOnly") -> dict[str, Any]:
    ref = {"group": "", "kind": "ConfigMap", "name": ca_map}
    return {"validation": {"caCertificateRefs": [ref], "mode": mode}}


def _gateway(
    strict: int, fallback: int, plain: int, ca_map: str = "client-ca", mode: str = "AllowValidOnly"
) -> dict[str, Any]:
    cert = {"certificateRefs": [{"kind": "Secret", "name": "gw-cert"}]}
    listeners = [
        {"name": "strict", "port": strict, "protocol": "HTTPS", "hostname": STRICT, "tls": cert},
        {"name": "fallback", "port": fallback, "protocol": "HTTPS", "hostname": FALLBACK,
         "tls": cert},
        {"name": "http", "port": plain, "protocol": "HTTP"},
    ]  # fmt: skip
    frontend = {
        "default": _validation(ca_map, mode),
        "perPort": [{"port": fallback, "tls": _validation(ca_map, "AllowInsecureFallback")}],
    }
    return gateway("gw", listeners, tls={"frontend": frontend})


def _ask(tmp: Path, port: int, host: str, who: Issued | None) -> str:
    """The backend that answered, the status, or "refused" (the handshake
    failed: TLS 1.3 clients learn it at their first read)."""
    try:
        with httpx.Client(verify=client_context(tmp, who), timeout=10) as c:
            req = c.build_request(
                "GET", f"https://{ADDRESS}:{port}/", headers={"Host": host},
                extensions={"sni_hostname": host},
            )  # fmt: skip
            r = c.send(req)
    except (httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError):
        return "refused"
    if r.status_code != 200:
        return str(r.status_code)
    return str(r.json().get("name"))


@pytest.mark.flavours("nginx", "nginx-1.30", "angie")
def test_client_certificates_verified_per_listener_without_reloads(
    ferryman: Ferryman, backends: Backends, tmp_path: Path
) -> None:
    strict, fallback, plain = free_port(), free_port(), free_port()
    alice = issue("frontend-ca", "alice")
    mallory = issue("frontend-other-ca", "mallory")
    ferryman.write("svc", service_with_backends("app", [backends.start("app")]))
    ferryman.write("class", gateway_class())
    ferryman.write("cert", tls_secret("gw-cert", [STRICT, FALLBACK]))
    ferryman.write("ca", _ca_map("client-ca", "frontend-ca"))
    ferryman.write("gw", _gateway(strict, fallback, plain))
    ferryman.write("route", route("r", "gw", [STRICT, FALLBACK, "plain.example.com"], [to("app")]))
    ferryman.extra_args += ["--enable-gateway-api", "--gateway-addresses", ADDRESS]
    ferryman.start()

    def verdicts(port: int, host: str) -> tuple[str, str, str]:
        return tuple(_ask(tmp_path, port, host, who) for who in (alice, None, mallory))  # type: ignore[return-value]

    eventually(lambda: _ask(tmp_path, strict, STRICT, alice) == "app", 60, "a verified client")
    assert verdicts(strict, STRICT) == ("app", "refused", "refused")
    assert verdicts(fallback, FALLBACK) == ("app", "app", "app")
    reloads = ferryman.reloads()

    # The ConfigMap now holds the other CA: mallory is let in, alice not.
    ferryman.write("ca", _ca_map("client-ca", "frontend-other-ca"))
    eventually(lambda: verdicts(strict, STRICT) == ("refused", "refused", "app"),
               what="the ConfigMap's new CA")  # fmt: skip
    assert verdicts(fallback, FALLBACK) == ("app", "app", "app")
    assert ferryman.reloads() == reloads
    # The strict port falls back too: a push as well.
    ferryman.write("gw", _gateway(strict, fallback, plain, mode="AllowInsecureFallback"))
    eventually(lambda: verdicts(strict, STRICT) == ("app", "app", "app"), what="the new mode")
    ferryman.write("gw", _gateway(strict, fallback, plain))
    eventually(lambda: verdicts(strict, STRICT) == ("refused", "refused", "app"),
               what="AllowValidOnly again")  # fmt: skip
    assert ferryman.reloads() == reloads

    # A reference that does not resolve: its HTTPS listeners are not served
    # (never without their validation); the HTTP listener goes on.
    ferryman.write("gw", _gateway(strict, fallback, plain, ca_map="missing"))
    eventually(lambda: _ask(tmp_path, strict, STRICT, mallory) == "refused",
               what="the listener without a CA")  # fmt: skip
    assert _ask(tmp_path, fallback, FALLBACK, None) == "refused"
    r = get_at(ADDRESS, plain, "plain.example.com")
    assert (r.status, r.served_by) == (200, "app")
