"""ingress-nginx's cookie affinity settings beyond NGINX's sticky cookie:
session-cookie-conditional-samesite-none and session-cookie-change-on-failure,
through real NGINX and real backends, with no reload."""

from __future__ import annotations

import hashlib

from testkit.annotated_ingress import HOST, annotated, last
from testkit.harness import Backends, BrokenBackend, Ferryman, eventually, service_with_backends

P = "nginx.ingress.kubernetes.io/"
AFFINITY = {
    P + "affinity": "cookie",
    P + "session-cookie-name": "route",
    P + "session-cookie-samesite": "None",
    P + "session-cookie-secure": "true",
}
MODERN = (
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/120.0.0.0 Safari/537.36"
)
# Clients Chromium lists as rejecting SameSite=None or reading it as Strict.
UNSAFE = (
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/60.0.3112.113 Safari/537.36",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 12_4 like Mac OS X) AppleWebKit/605.1.15 "
    "(KHTML, like Gecko) Version/12.1.2 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_14_6) AppleWebKit/605.1.15 "
    "(KHTML, like Gecko) Version/12.1.2 Safari/605.1.15",
    "Mozilla/5.0 (Linux; U; Android 8.0.0; en-US) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Version/4.0 Chrome/57.0.2987.108 UCBrowser/12.13.1.1189 Mobile Safari/537.36",
)
SAFE = (
    MODERN,
    # UC Browser 12.13.2 and Chrome on macOS 10.14 take it.
    "Mozilla/5.0 (Linux; U; Android 8.0.0; en-US) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Version/4.0 Chrome/80.0.3987.108 UCBrowser/12.13.2.1208 Mobile Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_14_6) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/120.0.0.0 Safari/537.36",
)


def _samesite(f: Ferryman, agent: str) -> bool:
    cookie = f.get(HOST, "/", headers={"User-Agent": agent}).headers["set-cookie"]
    assert cookie.startswith("route=")
    return "samesite=none" in cookie.lower()


def test_conditional_samesite_none_by_user_agent(ferryman: Ferryman, backends: Backends) -> None:
    f = ferryman
    f.write("svc", service_with_backends("app", [backends.start("a")]))
    f.write("doc0", annotated({**AFFINITY, P + "session-cookie-conditional-samesite-none": "true"}))
    f.start()
    assert last(f)["reason"] == "AddedOrUpdated"
    for agent in SAFE:
        assert _samesite(f, agent), agent
    for agent in UNSAFE:
        assert not _samesite(f, agent), agent
    # Without it every client gets SameSite=None, as before; no reload.
    f.write("doc0", annotated(AFFINITY))
    eventually(lambda: _samesite(f, UNSAFE[0]), 60, "unconditional")
    assert f.reloads() == 1


def test_a_failed_peer_moves_the_cookie_to_the_one_that_answered(
    ferryman: Ferryman, backends: Backends
) -> None:
    """change-on-failure true: the request whose cookie names a failing peer is
    served by another, and the cookie now names that one; false (not served)
    is said in a Warning."""
    f = ferryman
    broken = BrokenBackend()
    a = backends.start("a")
    f.write("svc", service_with_backends("app", [a, broken]))
    f.write("doc0", annotated({**AFFINITY, P + "session-cookie-change-on-failure": "true"}))
    f.start()
    assert last(f)["reason"] == "AddedOrUpdated"
    dead = hashlib.md5(f"127.0.0.1:{broken.port}".encode()).hexdigest()
    alive = hashlib.md5(f"127.0.0.1:{a.port}".encode()).hexdigest()
    r = f.get(HOST, "/", headers={"Cookie": f"route={dead}"})
    assert r.served_by == "a"
    assert r.headers["set-cookie"].startswith(f"route={alive};")
    assert broken.accepted >= 1  # the cookie's peer was tried first
    f.write("doc0", annotated({**AFFINITY, P + "session-cookie-change-on-failure": "false"}))
    eventually(lambda: last(f)["reason"] == "AddedOrUpdatedWithWarning", 60, "warned")
    assert f"{P}session-cookie-change-on-failure: 'false' is not applied" in last(f)["message"]
    assert f.reloads() == 1
