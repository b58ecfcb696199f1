"""NIC's Policy examples (../shared/vendor/nic-examples-v5.5.4/custom-resources:
access-control, rate-limit, both rate-limit-tiered, basic-auth, api-key, cors),
applied unchanged, behave as their READMEs say, through real NGINX with no
reload. The Secrets
their READMEs make with ``make secrets`` are written here with the content
the READMEs use (user foo, password bar; the API key "password"; for
rate-limit-tiered-apikey, whose ``api-key-secret.yaml`` is not in the folder, the
client names its tiers match and the header values its README sends as keys).
vsr-route-selector-policies is in test_vsr_policies.py."""

from __future__ import annotations

import subprocess
import time

from testkit.harness import (
    Backends,
    Ferryman,
    eventually,
    served_by,
    service_with_backends,
    tls_secret,
)
from testkit.nic_fixtures import NIC_EXAMPLES
from testkit.nic_policy_examples import PREFLIGHT, _basic, _secret


def _example(ferryman: Ferryman, folder: str, name: str) -> None:
    ferryman.write_text(f"{folder}-{name}", (NIC_EXAMPLES / folder / name).read_text())


def test_access_control(ferryman: Ferryman, backends: Backends) -> None:
    """The allow policy (10.0.0.0/8) refuses clients outside it with 403; the deny
    policy of the same name lets them in. Replacing one by the other reloads nothing."""
    ferryman.write("webapp", service_with_backends("webapp-svc", [backends.start("webapp")]))
    _example(ferryman, "access-control", "access-control-policy-allow.yaml")
    _example(ferryman, "access-control", "virtual-server.yaml")
    ferryman.start()
    r = ferryman.get("webapp.example.com", "/")
    assert r.status == 403 and "403 Forbidden" in r.text
    ferryman.remove("access-control-access-control-policy-allow.yaml".removesuffix(".yaml"))
    _example(ferryman, "access-control", "access-control-policy-deny.yaml")
    eventually(lambda: served_by(ferryman, "webapp.example.com", "/") == "webapp", 60, "deny")
    assert ferryman.reloads() == 1


def test_rate_limit(ferryman: Ferryman, backends: Backends) -> None:
    """1 request a second per client address: the first answers, the next at once is 503."""
    ferryman.write("webapp", service_with_backends("webapp-svc", [backends.start("webapp")]))
    _example(ferryman, "rate-limit", "rate-limit.yaml")
    _example(ferryman, "rate-limit", "virtual-server.yaml")
    ferryman.start()
    assert served_by(ferryman, "webapp.example.com", "/") == "webapp"
    r = ferryman.get("webapp.example.com", "/")
    assert r.status == 503 and "503 Service Temporarily Unavailable" in r.text
    assert ferryman.reloads() == 1


def test_basic_auth(ferryman: Ferryman, backends: Backends) -> None:
    """Without a valid user and password: 401 Authorization Required; with foo:bar, coffee."""
    ferryman.write("coffee", service_with_backends("coffee-svc", [backends.start("coffee")]))
    ferryman.write("tea", service_with_backends("tea-svc", [backends.start("tea")]))
    hashed = subprocess.run(
        ["openssl", "passwd", "-apr1", "bar"], capture_output=True, text=True, check=True
    ).stdout.strip()
    htpasswd = f"foo:{hashed}\n".encode()
    ferryman.write("passwd", _secret("cafe-passwd", "nginx.org/htpasswd", {"htpasswd": htpasswd}))
    ferryman.write("tls", tls_secret("tls-secret", ["cafe.example.com"]))
    _example(ferryman, "basic-auth", "basic-auth-policy.yaml")
    _example(ferryman, "basic-auth", "cafe-virtual-server.yaml")
    ferryman.start()
    r = ferryman.get("cafe.example.com", "/coffee", https=True)
    assert r.status == 401 and "401 Authorization Required" in r.text
    assert r.headers["www-authenticate"] == 'Basic realm="Cafe App"'
    r = ferryman.get("cafe.example.com", "/coffee", https=True, headers=_basic("foo", "bar"))
    assert r.served_by == "coffee"
    assert ferryman.reloads() == 1


def test_api_key(ferryman: Ferryman, backends: Backends) -> None:
    """No key: 401; a wrong one in X-header-name: 403; the right one: coffee."""
    ferryman.write("coffee", service_with_backends("coffee-svc", [backends.start("coffee")]))
    keys = _secret("api-key-client-secret", "nginx.org/apikey", {"client1": b"password"})
    ferryman.write("keys", keys)
    ferryman.write("tls", tls_secret("app-tls-secret", ["cafe.example.com"]))
    _example(ferryman, "api-key", "api-key-policy.yaml")
    _example(ferryman, "api-key", "cafe-virtual-server.yaml")
    ferryman.start()
    r = ferryman.get("cafe.example.com", "/", https=True)
    assert r.status == 401 and "401 Authorization Required" in r.text
    r = ferryman.get(
        "cafe.example.com", "/coffee", https=True, headers={"X-header-name": "wrongpassword"}
    )
    assert r.status == 403 and "403 Forbidden" in r.text
    r = ferryman.get(
        "cafe.example.com", "/coffee", https=True, headers={"X-header-name": "password"}
    )
    assert r.served_by == "coffee"
    assert ferryman.reloads() == 1


def test_cors(ferryman: Ferryman, backends: Backends) -> None:
    """Preflights to /test answer 204 with cors-policy's headers; an actual request
    gets them on the backend's answer; /prod uses wildcard-cors-policy, where
    https://example.com matches no origin: 204 without Access-Control-Allow-Origin.
    (The README's first listing shows wildcard-cors-policy's methods and max age for
    /test; NIC's configuration gives /test the VirtualServer's cors-policy, as its
    second listing shows and as asserted here.)"""
    ferryman.write("webapp", service_with_backends("webapp-svc", [backends.start("webapp")]))
    for name in ("cors-policy.yaml", "wildcard-cors-policy.yaml", "virtual-server.yaml"):
        _example(ferryman, "cors", name)
    ferryman.start()
    host = "webapp.example.com"
    want = {
        "access-control-allow-origin": "https://app.example.com",
        "access-control-allow-methods": "GET, POST, PUT, DELETE, OPTIONS",
        "access-control-allow-headers": "Content-Type, Authorization, X-Requested-With, X-API-Key",
        "access-control-allow-credentials": "true",
        "access-control-expose-headers": (
            "X-Total-Count, X-Page-Size, X-RateLimit-Remaining, X-RateLimit-Reset"
        ),
        "access-control-max-age": "3600",
        "vary": "Origin",
    }
    r = ferryman.get(host, "/test/", method="OPTIONS", headers=PREFLIGHT)
    assert r.status == 204
    assert {k: r.headers.get(k) for k in want} == want
    # NIC's add_header lines also give this 204 "Content-Type: text/plain" and
    # "Content-Length: 0"; NGINX drops both from a 204 Lua answers (docs say so).
    r = ferryman.get(host, "/test/", method="POST", headers=PREFLIGHT)
    assert r.served_by == "webapp"
    assert {k: r.headers.get(k) for k in want} == want
    r = ferryman.get(
        host, "/prod/", method="OPTIONS", headers={**PREFLIGHT, "Origin": "https://example.com"}
    )
    assert r.status == 204
    assert "access-control-allow-origin" not in r.headers
    assert r.headers["access-control-allow-methods"] == "GET, POST, PUT, OPTIONS"
    assert r.headers["access-control-max-age"] == "86400"
    assert r.headers["vary"] == "Origin"
    # A subdomain matches the wildcard: the request's own origin is allowed.
    r = ferryman.get(host, "/prod/", headers={"Origin": "https://shop.example.com"})
    assert r.served_by == "webapp"
    assert r.headers["access-control-allow-origin"] == "https://shop.example.com"
    assert ferryman.reloads() == 1


def test_rate_limit_tiered_apikey(ferryman: Ferryman, backends: Backends) -> None:
    """Tiers by the API key's client name (regular expressions of $apikey_client_name),
    keyed by ${apikey_auth_token}: "-premium" clients get 5r/s, "-basic" ones 1r/s,
    and a client matching neither the default tier, basic; over the rate, 429."""
    ferryman.write("coffee", service_with_backends("coffee-svc", [backends.start("coffee")]))
    clients = {"client1-premium": b"client1premium", "client1-basic": b"client1basic"}
    keys = _secret("api-key-client-secret", "nginx.org/apikey", {**clients, "random": b"random"})
    ferryman.write("keys", keys)
    for name in ("api-key-policy.yaml", "rate-limits.yaml", "cafe-virtual-server.yaml"):
        _example(ferryman, "rate-limit-tiered-apikey", name)
    ferryman.start()
    assert ferryman.get("cafe.example.com", "/coffee").status == 401

    def get(key: str) -> int:
        return ferryman.get("cafe.example.com", "/coffee", headers={"X-header-name": key}).status

    for key, per_second in (("client1premium", 5), ("client1basic", 1), ("random", 1)):
        assert [get(key), get(key)] == [200, 429], key
        # A quarter of a second later: 5r/s has leaked more than a request, 1r/s has not.
        time.sleep(0.3)
        assert get(key) == (200 if per_second == 5 else 429), key
    assert ferryman.reloads() == 1


def test_rate_limit_tiered_request_method(ferryman: Ferryman, backends: Backends) -> None:
    """Tiers by $request_method ("~GET|HEAD" 5r/s; "~PUT|POST|PATCH|DELETE" 1r/s, also
    the default, so OPTIONS gets it); over the rate, 429."""
    ferryman.write("coffee", service_with_backends("coffee-svc", [backends.start("coffee")]))
    for name in ("rate-limits.yaml", "cafe-virtual-server.yaml"):
        _example(ferryman, "rate-limit-tiered-request-method", name)
    ferryman.start()

    def call(method: str) -> int:
        return ferryman.get("cafe.example.com", "/coffee", method=method).status

    for method, per_second in (("GET", 5), ("POST", 1), ("OPTIONS", 1)):
        assert [call(method), call(method)] == [200, 429], method
        time.sleep(0.3)  # 5r/s leaks more than a request meanwhile, 1r/s does not
        assert call(method) == (200 if per_second == 5 else 429), method
    r = ferryman.get("cafe.example.com", "/coffee", method="POST")
    assert r.status == 429 and "429 Too Many Requests" in r.text  # the README's page
    assert ferryman.reloads() == 1
