"""What NIC's session-persistence examples promise, checked the same way for the
Ingress annotation (nginx.org/sticky-cookie-services) and the VirtualServer
field (sessionCookie): both ask NGINX's sticky cookie of the same srv_id."""

from __future__ import annotations

import re

from testkit.harness import Ferryman

_TEA_COOKIE = re.compile(
    r"srv_id=[0-9a-f]{32}; expires=\w{3}, \d\d-\w{3}-\d\d \d\d:\d\d:\d\d GMT; "
    r"max-age=7200; path=/tea"
)


def assert_cafe_sessions(f: Ferryman, host: str) -> None:
    """/tea (pods tea and tea2) sets srv_id for 2 h on /tea naming the pod that
    answered, balanced as usual without the cookie; with it, the same pod every
    time and no new cookie; /coffee's lasts 1 h on /coffee."""
    seen = set()
    for _ in range(4):
        r = f.get(host, "/tea")
        seen.add(r.served_by)
        assert _TEA_COOKIE.fullmatch(r.headers["set-cookie"]), r.headers["set-cookie"]
    assert seen == {"tea", "tea2"}  # no cookie: round-robin
    r = f.get(host, "/tea")
    pod, value = r.served_by, r.headers["set-cookie"].split(";")[0]
    for _ in range(6):
        again = f.get(host, "/tea", headers={"Cookie": value})
        assert again.served_by == pod
        assert "set-cookie" not in again.headers  # the cookie already names it
    r = f.get(host, "/coffee")
    assert r.served_by == "coffee"
    assert r.headers["set-cookie"].endswith("; max-age=3600; path=/coffee")
