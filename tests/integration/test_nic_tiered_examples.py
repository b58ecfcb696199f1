"""NIC's rate-limit-tiered-apikey, rate-limit-tiered-request-method and
grpc-upstreams examples, applied unchanged, through real NGINX with no reload.
The README's ``api-key-secret.yaml`` is not in the folder: written here with
client names the READMEs' tiers match (client1-premium, client1-basic, random)
and the header values they send as keys."""

from __future__ import annotations

import base64
import time

from tests.integration.harness import Backends, Ferryman, service_with_backends, tls_secret
from tests.unit.nic_fixtures import NIC_EXAMPLES

CAFE = "cafe.example.com"


def _example(f: Ferryman, folder: str, name: str) -> None:
    f.write_text(f"{folder}-{name}", (NIC_EXAMPLES / folder / name).read_text())


def _two(f: Ferryman, gap: float, **kw: object) -> tuple[int, int]:
    """Two requests ``gap`` seconds apart: their statuses."""
    first = f.get(CAFE, "/coffee", **kw).status  # type: ignore[arg-type]
    time.sleep(gap)
    return first, f.get(CAFE, "/coffee", **kw).status  # type: ignore[arg-type]


def test_rate_limit_tiered_apikey(ferryman: Ferryman, backends: Backends) -> None:
    """Premium keys: 5 r/s (two requests 0.3 s apart pass); basic keys and keys
    of no tier (the default, basic): 1 r/s (the second at once is 429). Each key
    its own bucket (key ${apikey_auth_token})."""
    f = ferryman
    f.write("coffee", service_with_backends("coffee-svc", [backends.start("coffee")]))
    keys = {"client1-premium": b"client1premium", "client1-basic": b"client1basic"}
    keys["random"] = b"random"
    f.write(
        "keys",
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "api-key-client-secret", "namespace": "default"},
            "type": "nginx.org/apikey",
            "data": {k: base64.b64encode(v).decode() for k, v in keys.items()},
        },
    )
    folder = "rate-limit-tiered-apikey"
    for name in ("api-key-policy.yaml", "rate-limits.yaml", "cafe-virtual-server.yaml"):
        _example(f, folder, name)
    f.start()
    assert f.get(CAFE, "/coffee").status == 401

    def header(v: str) -> dict[str, dict[str, str]]:
        return {"headers": {"X-header-name": v}}

    assert _two(f, 0.3, **header("client1premium")) == (200, 200)
    assert _two(f, 0.0, **header("client1basic")) == (200, 429)
    assert _two(f, 0.0, **header("random")) == (200, 429)
    assert f.reloads() == 1


def test_rate_limit_tiered_request_method(ferryman: Ferryman, backends: Backends) -> None:
    """GET and HEAD: 5 r/s; PUT, POST, PATCH, DELETE and any other method (the
    default tier): 1 r/s, 429 beyond; one bucket per method (key ${request_method})."""
    f = ferryman
    f.write("coffee", service_with_backends("coffee-svc", [backends.start("coffee")]))
    folder = "rate-limit-tiered-request-method"
    for name in ("rate-limits.yaml", "cafe-virtual-server.yaml"):
        _example(f, folder, name)
    f.start()
    assert _two(f, 0.3) == (200, 200)
    assert _two(f, 0.0, method="POST") == (200, 429)
    r = f.get(CAFE, "/coffee", method="POST")
    assert r.status == 429 and "429 Too Many Requests" in r.text
    assert _two(f, 0.0, method="OPTIONS") == (200, 429)
    assert f.reloads() == 1


def test_grpc_upstreams(ferryman: Ferryman, backends: Backends) -> None:
    """``type: grpc`` is not implemented yet: the VirtualServer is served (HTTP/1.1
    proxying) with a Warning naming the field, as docs/virtualserver.md says."""
    f = ferryman
    f.write(
        "grpc",
        service_with_backends("grpc-svc", [backends.start("grpc")], port=50051),
    )
    f.write("tls", tls_secret("tls-secret", ["greeter.example.com"]))
    _example(f, "grpc-upstreams", "greeter-virtual-server.yaml")
    f.start()
    e = [e for e in f.events_for("cafe") if e.get("kind") == "VirtualServer"][-1]
    assert (e["type"], e["reason"]) == ("Warning", "AddedOrUpdatedWithWarning")
    # vs_upstream.unsupported's words (h3) for the field h2's test first saw generic.
    assert "spec.upstreams[0].type: gRPC needs HTTP/2 listeners" in e["message"]
    r = f.get("greeter.example.com", "/helloworld.Greeter/SayHello", https=True)
    assert r.served_by == "grpc"
