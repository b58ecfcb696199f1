"""NIC's Policies on VirtualServers through real NGINX, with real traffic:
which policy applies where (spec vs route), missing and invalid policies
(500 and NIC's Warning), each kind enforcing, and no reload for any Policy
or attachment change."""

from __future__ import annotations

import base64
import hashlib
import re
import subprocess
import time

from testkit.harness import (
    Backends,
    Ferryman,
    at_once,
    eventually,
    served_by,
)
from testkit.virtualservers import start_with_backends, to, vs
from testkit.vs_policies import (
    last_event,
    libc_hash,
    policy,
    rate_limit,
    refs,
    secret,
    status,
)


def test_access_control_allow_and_deny(ferryman: Ferryman, backends: Backends) -> None:
    routes = [
        {"path": "/", "action": to("a")},
        {"path": "/open", "action": to("b"), "policies": refs("let-local")},
    ]
    start_with_backends(
        ferryman,
        backends,
        policy("deny-local", accessControl={"deny": ["127.0.0.0/8"]}),
        policy("let-local", accessControl={"allow": ["127.0.0.1"]}),
        vs("cafe", "cafe.test", routes, policies=refs("deny-local")),
    )
    # The VirtualServer's policy on the route without its own, and on paths no route has.
    assert status(ferryman, "cafe.test", "/") == 403
    # A route's accessControl replaces the VirtualServer's (NGINX's inheritance).
    assert served_by(ferryman, "cafe.test", "/open") == "b"
    assert last_event(ferryman, "cafe")["reason"] == "AddedOrUpdated"


def test_missing_policy_answers_500_with_nics_warning(
    ferryman: Ferryman, backends: Backends
) -> None:
    routes = [
        {"path": "/", "action": to("a")},
        {"path": "/guarded", "action": to("b"), "policies": refs("later")},
    ]
    start_with_backends(ferryman, backends, vs("cafe", "cafe.test", routes))
    assert status(ferryman, "cafe.test", "/guarded") == 500
    assert served_by(ferryman, "cafe.test", "/") == "a"  # other routes serve
    event = last_event(ferryman, "cafe")
    assert event["reason"] == "AddedOrUpdatedWithWarning"
    assert event["message"] == (
        "Configuration for default/cafe was added or updated with warning(s): "
        "Policy default/later is missing or invalid"
    )
    # Created: its user is translated again, with no reload.
    ferryman.write("later", policy("later", accessControl={"allow": ["10.0.0.0/8"]}))
    eventually(lambda: status(ferryman, "cafe.test", "/guarded") == 403, 60, "enforced")
    assert last_event(ferryman, "cafe")["reason"] == "AddedOrUpdated"
    # Invalid: as missing.
    ferryman.write("later", policy("later", accessControl={"allow": ["10.0.0.0/33"]}))
    eventually(lambda: status(ferryman, "cafe.test", "/guarded") == 500, 60, "invalid")
    pol = last_event(ferryman, "later", "Policy")
    assert pol["reason"] == "Rejected"
    assert pol["message"].startswith("Policy default/later is invalid and was rejected: ")
    # Edited to allow us, then deleted.
    ferryman.write("later", policy("later", accessControl={"allow": ["127.0.0.0/8"]}))
    eventually(lambda: served_by(ferryman, "cafe.test", "/guarded") == "b", 60, "allowed")
    assert last_event(ferryman, "later", "Policy")["message"] == (
        "Policy default/later was added or updated"
    )
    ferryman.remove("later")
    eventually(lambda: status(ferryman, "cafe.test", "/guarded") == 500, 60, "deleted")
    assert ferryman.reloads() == 1  # the start-up reload only


def test_a_missing_spec_policy_fails_the_whole_host(ferryman: Ferryman, backends: Backends) -> None:
    routes = [{"path": "/", "action": to("a")}]
    start_with_backends(ferryman, backends, vs("cafe", "cafe.test", routes, policies=refs("gone")))
    # NIC's server-level "return 500": every path, routed or not.
    assert status(ferryman, "cafe.test", "/") == 500
    assert status(ferryman, "cafe.test", "/nowhere") == 500
    assert "Policy default/gone is missing or invalid" in last_event(ferryman, "cafe")["message"]


def test_rate_limit_burst_nodelay_and_reject_code(ferryman: Ferryman, backends: Backends) -> None:
    routes = [
        {"path": "/", "action": to("a")},
        {"path": "/per-user", "action": to("b"), "policies": refs("per-user")},
    ]
    start_with_backends(
        ferryman,
        backends,
        rate_limit("fast", rate="1r/s", burst=3, noDelay=True, rejectCode=429),
        rate_limit("per-user", rate="1r/m", key="${http_x_user}"),
        vs("cafe", "cafe.test", routes, policies=refs("fast")),
    )
    # 1r/s with burst 3: four at once pass, the fifth is refused with the rejectCode.
    got = [status(ferryman, "cafe.test", "/") for _ in range(5)]
    assert got == [200, 200, 200, 200, 429]
    # Leaking one request a second: one more passes after a second.
    time.sleep(1.1)
    assert [status(ferryman, "cafe.test", "/") for _ in range(2)] == [200, 429]
    # The route's own limit replaces the VirtualServer's; its key is a header:
    # one bucket per user, and no key (no header) is not limited.
    alice = {"headers": {"X-User": "alice"}}
    assert [status(ferryman, "cafe.test", "/per-user", **alice) for _ in range(2)] == [200, 503]
    assert status(ferryman, "cafe.test", "/per-user", headers={"X-User": "bob"}) == 200
    assert [status(ferryman, "cafe.test", "/per-user") for _ in range(3)] == [200] * 3
    assert ferryman.reloads() == 1


def test_rate_limit_delays_beyond_delay_and_rejects_past_burst(
    ferryman: Ferryman, backends: Backends
) -> None:
    start_with_backends(
        ferryman,
        backends,
        rate_limit("slow", rate="1r/s", burst=3),
        rate_limit("some", rate="1r/s", burst=5, delay=2),
        vs("cafe", "cafe.test", [{"path": "/", "action": to("a")}], policies=refs("slow")),
        vs("tea", "tea.test", [{"path": "/", "action": to("a")}], policies=refs("some")),
    )
    # burst 3 without delay: five at once; one now, three queued a second apart
    # (NGINX's delay), the fifth refused at once.
    results = at_once(ferryman.http_port, "cafe.test", "/", 5)
    assert [s for s, _ in results] == [503, 200, 200, 200, 200] or [s for s, _ in results] == [
        200,
        503,
        200,
        200,
        200,
    ]
    waits = sorted(t for s, t in results if s == 200)
    assert waits[0] < 0.5 and 0.7 < waits[1] < 1.6 and 1.7 < waits[2] < 2.6 and waits[3] > 2.7
    # delay=2: two beyond the rate pass undelayed, the next waits.
    tea = at_once(ferryman.http_port, "tea.test", "/", 4)
    quick, (s, t) = tea[:3], tea[3]
    assert all(s == 200 and t < 0.5 for s, t in quick), tea
    assert s == 200 and 0.7 < t < 1.6, tea


def test_rate_limit_dry_run_only_logs(ferryman: Ferryman, backends: Backends) -> None:
    start_with_backends(
        ferryman,
        backends,
        rate_limit("dry", rate="1r/m", dryRun=True, logLevel="warn"),
        vs("cafe", "cafe.test", [{"path": "/", "action": to("a")}], policies=refs("dry")),
    )
    assert [status(ferryman, "cafe.test", "/") for _ in range(3)] == [200] * 3
    # NGINX's words at the logLevel, NIC's zone name (the Policy's and the VirtualServer's).
    line = eventually(
        lambda: [x for x in ferryman.logs().splitlines() if "limiting requests, dry run" in x],
        60,
        "NGINX's log line",
    )[0]
    # 1.000 when the requests came within a millisecond; the bucket drains
    # 1/60 a second, so a loaded machine's slower requests log a little less.
    excess = re.search(r"excess: (\d+\.\d{3}) by zone", line)
    assert "[warn]" in line and excess is not None, line
    assert 0.9 <= float(excess.group(1)) <= 2.0, line
    assert "pol_rl_default_dry_default_cafe_vs" in line


def openssl_passwd(option: str, password: str) -> str:
    out = subprocess.run(
        ["openssl", "passwd", option, password], capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


def htpasswd_lines() -> dict[str, str]:
    """One user per scheme NGINX's auth_basic reads; each user's password is "pw-<user>"."""
    salt = b"\x01\x02\x03\x04"
    ssha = base64.b64encode(hashlib.sha1(b"pw-ssha" + salt).digest() + salt).decode()
    return {
        "md5": libc_hash("pw-md5", "$1$"),
        "sha256": libc_hash("pw-sha256", "$5$"),
        "sha512": libc_hash("pw-sha512", "$6$"),
        "yescrypt": libc_hash("pw-yescrypt", "$y$"),
        "bcrypt": libc_hash("pw-bcrypt", "$2b$"),
        "des": libc_hash("pw-des", ""),
        "apr1": openssl_passwd("-apr1", "pw-apr1"),
        "plain": "{PLAIN}pw-plain",
        "sha": "{SHA}" + base64.b64encode(hashlib.sha1(b"pw-sha").digest()).decode(),
        "ssha": "{SSHA}" + ssha,
    }


def test_basic_auth_every_hash_scheme(ferryman: Ferryman, backends: Backends) -> None:
    lines = htpasswd_lines()
    text = "# users\n" + "".join(f"{u}:{h}:comment\n" for u, h in lines.items())
    start_with_backends(
        ferryman,
        backends,
        secret("users", "nginx.org/htpasswd", {"htpasswd": text.encode()}),
        policy("auth", basicAuth={"secret": "users", "realm": "Cafe App"}),
        vs("cafe", "cafe.test", [{"path": "/", "action": to("a")}], policies=refs("auth")),
    )

    def basic(user: str, password: str) -> dict[str, str]:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        return {"Authorization": f"Basic {token}"}

    r = ferryman.get("cafe.test", "/")
    assert r.status == 401
    assert r.headers["www-authenticate"] == 'Basic realm="Cafe App"'
    assert "401 Authorization Required" in r.text
    for user in lines:
        assert ferryman.get("cafe.test", "/", headers=basic(user, f"pw-{user}")).served_by == "a"
        assert status(ferryman, "cafe.test", "/", headers=basic(user, "wrong")) == 401, user
    assert status(ferryman, "cafe.test", "/", headers=basic("nobody", "pw-nobody")) == 401
    assert ferryman.reloads() == 1


def test_basic_auth_secret_problems_answer_500(ferryman: Ferryman, backends: Backends) -> None:
    routes = [
        {"path": "/wrong-type", "action": to("a"), "policies": refs("wrong-type")},
        {"path": "/no-key", "action": to("a"), "policies": refs("no-key")},
        {"path": "/missing", "action": to("a"), "policies": refs("missing")},
    ]
    start_with_backends(
        ferryman,
        backends,
        secret("tls-like", "nginx.org/apikey", {"client": b"key"}),
        secret("empty", "nginx.org/htpasswd", {"other": b""}),
        policy("wrong-type", basicAuth={"secret": "tls-like"}),
        policy("no-key", basicAuth={"secret": "empty"}),
        policy("missing", basicAuth={"secret": "absent"}),
        vs("cafe", "cafe.test", routes),
    )
    for p in ("/wrong-type", "/no-key", "/missing"):
        assert status(ferryman, "cafe.test", p) == 500, p
    message = last_event(ferryman, "cafe")["message"]
    for text in (
        "Basic Auth policy default/wrong-type references a secret default/tls-like of a "
        "wrong type 'nginx.org/apikey', must be 'nginx.org/htpasswd'",
        "Basic Auth policy default/no-key references an invalid secret default/empty: "
        "htpasswd secret must have the data field htpasswd",
        "Basic Auth policy default/missing references an invalid secret default/absent: "
        "secret doesn't exist or of an unsupported type",
    ):
        assert text in message
    # The Secret appears: its user is translated again.
    ferryman.write("absent", secret("absent", "nginx.org/htpasswd", {"htpasswd": b"u:{PLAIN}p"}))
    eventually(lambda: status(ferryman, "cafe.test", "/missing") == 401, 60, "the Secret used")
    assert ferryman.reloads() == 1


def test_api_key_header_or_query(ferryman: Ferryman, backends: Backends) -> None:
    routes = [{"path": "/", "action": to("a")}]
    start_with_backends(
        ferryman,
        backends,
        secret("keys", "nginx.org/apikey", {"alice": b"password", "bob": b"s3cret"}),
        policy(
            "keys",
            apiKey={
                "suppliedIn": {"header": ["X-header-name"], "query": ["queryName"]},
                "clientSecret": "keys",
            },
        ),
        vs("cafe", "cafe.test", routes, policies=refs("keys")),
    )
    assert status(ferryman, "cafe.test", "/") == 401
    assert status(ferryman, "cafe.test", "/", headers={"X-Header-Name": "wrong"}) == 403
    assert served_by(ferryman, "cafe.test", "/", headers={"x-header-name": "password"}) == "a"
    assert served_by(ferryman, "cafe.test", "/?queryName=s3cret") == "a"
    assert status(ferryman, "cafe.test", "/?queryName=nope") == 403


def test_cors_headers_on_every_answer_of_the_route_and_route_precedence(
    ferryman: Ferryman, backends: Backends
) -> None:
    routes = [
        {"path": "/", "action": to("a")},
        {"path": "/locked", "action": to("a"), "policies": refs("nobody")},
        {"path": "/own", "action": to("b"), "policies": refs("own-cors")},
    ]
    start_with_backends(
        ferryman,
        backends,
        policy("site-cors", cors={"allowOrigin": ["https://site.test"], "maxAge": 60}),
        policy("own-cors", cors={"allowOrigin": ["*"], "allowMethods": ["GET"]}),
        policy("nobody", accessControl={"allow": ["10.0.0.0/8"]}),
        vs("cafe", "cafe.test", routes, policies=refs("site-cors")),
    )
    r = ferryman.get("cafe.test", "/", headers={"Origin": "https://other.test"})
    assert r.served_by == "a"
    # One configured origin: sent whatever the request's (NIC's add_header).
    assert r.headers["access-control-allow-origin"] == "https://site.test"
    assert (r.headers["vary"], r.headers["access-control-max-age"]) == ("Origin", "60")
    # NIC's add_header ... always: a policy's refusal carries them too.
    r = ferryman.get("cafe.test", "/locked")
    assert r.status == 403 and r.headers["access-control-allow-origin"] == "https://site.test"
    # A preflight is answered before the route's other policies.
    assert status(ferryman, "cafe.test", "/locked", method="OPTIONS") == 204
    # The route's own cors replaces the VirtualServer's.
    r = ferryman.get("cafe.test", "/own")
    assert r.headers["access-control-allow-origin"] == "*" and "vary" not in r.headers
    assert r.headers["access-control-allow-methods"] == "GET"
    assert "access-control-max-age" in r.headers  # the CRD's default, 86400
    assert ferryman.reloads() == 1


def test_kinds_combine_across_levels_and_error_pages_take_policy_answers(
    ferryman: Ferryman, backends: Backends
) -> None:
    routes = [
        {
            "path": "/",
            "action": to("a"),
            "policies": refs("keys"),
            "errorPages": [
                {
                    "codes": [403],
                    "return": {"code": 200, "body": "ask for a key", "type": "text/plain"},
                }
            ],
        }
    ]
    start_with_backends(
        ferryman,
        backends,
        secret("users", "nginx.org/htpasswd", {"htpasswd": b"u:{PLAIN}p\n"}),
        secret("keys", "nginx.org/apikey", {"client": b"k"}),
        policy("auth", basicAuth={"secret": "users"}),
        policy("keys", apiKey={"suppliedIn": {"header": ["X-Key"]}, "clientSecret": "keys"}),
        vs("cafe", "cafe.test", routes, policies=refs("auth")),
    )
    user = {"Authorization": "Basic " + base64.b64encode(b"u:p").decode()}
    # The VirtualServer's basicAuth and the route's apiKey both hold (NGINX: satisfy all).
    assert status(ferryman, "cafe.test", "/", headers={"X-Key": "k"}) == 401
    assert status(ferryman, "cafe.test", "/", headers=user) == 401
    assert served_by(ferryman, "cafe.test", "/", headers={**user, "X-Key": "k"}) == "a"
    r = ferryman.get("cafe.test", "/", headers={**user, "X-Key": "wrong"})
    assert (r.status, r.text) == (200, "ask for a key")


def test_a_jwt_tier_without_the_jwt_policy_leaves_the_default_tier(
    ferryman: Ferryman, backends: Backends
) -> None:
    jwt_tier = {"jwt": {"claim": "user.tier", "match": "premium"}}
    start_with_backends(
        ferryman,
        backends,
        rate_limit("premium", rate="10r/s", burst=5, noDelay=True, condition=jwt_tier),
        rate_limit(
            "basic",
            rate="1r/m",
            condition={"jwt": {"claim": "user.tier", "match": "basic"}, "default": True},
        ),
        vs(
            "cafe",
            "cafe.test",
            [{"path": "/", "action": to("a")}],
            policies=refs("premium", "basic"),
        ),
    )
    assert [status(ferryman, "cafe.test", "/") for _ in range(2)] == [200, 503]
    assert (
        "rateLimit.condition.jwt reads the claims of the route's jwt Policy"
        in (last_event(ferryman, "cafe")["message"])
    )
