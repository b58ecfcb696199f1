"""A regular expression PCRE cannot run to its end (a long URI overflows its JIT
stack or reaches its match limit) answers 500 at once, as NGINX does for a
location regex that fails: the request never falls through to another route, a
condition never counts as holding or not, a policy is never skipped; with the
route in ngx_http_ferryman_module and in Lua alike."""

from __future__ import annotations

from typing import Any

from testkit.harness import (
    Backends,
    Ferryman,
    eventually,
    ingress,
    path,
    rule,
    served_by,
    service_with_backends,
)
from testkit.virtualservers import start_with_backends, to, vs
from testkit.vs_policies import policy, rate_limit, refs, secret, status

# Each "/a" one more repetition of the group: ngx.re's JIT stack runs out
# (pcre_exec() failed: -27) from about 820 of them (a 1.6 KB URI). The module's
# regexes run without JIT and match it: a route with policies is Lua's anyway.
ADMIN = "~ ^/admin(/[a-z0-9]+)*/?$"
LONG = "/admin" + "/a" * 1500
# Backtracking beyond PCRE's match limit, with JIT (Lua) and without (the
# module) alike.
NESTED = "^/(a+)+$"
BACKTRACKING = "/" + "a" * 30 + "!"


def logged(f: Ferryman, what: str, pattern: str, by_module: bool = False) -> bool:
    """Whether NGINX's error log has the failure of ``what``'s regex ``pattern``,
    logged by the module (not by Lua) when ``by_module``."""
    return any(
        "[error]" in line
        and f"{what} regex" in line
        and pattern in line
        and "cafe.test" in line
        and ("[lua]" not in line or not by_module)
        for line in f.logs().splitlines()
    )


def wait_logged(f: Ferryman, what: str, pattern: str, by_module: bool = False) -> None:
    """Until ``logged``: ferryman relays NGINX's error log as it reads it."""
    eventually(lambda: logged(f, what, pattern, by_module), 60, f"the {what} failure logged")


def in_module(f: Ferryman) -> bool:
    """Whether ``either_fast_path`` runs the fast path in the module (the Lua
    one has a modules directory of its own)."""
    return not f.extra_args


def basic_auth() -> list[dict[str, Any]]:
    return [
        secret("users", "nginx.org/htpasswd", {"htpasswd": b"user:{PLAIN}pw\n"}),
        policy("auth", basicAuth={"secret": "users", "realm": "Admin"}),
    ]


def test_a_route_regex_that_cannot_run_answers_500(
    either_fast_path: Ferryman, backends: Backends
) -> None:
    ferryman = either_fast_path
    routes = [
        {"path": "/", "action": to("a")},
        {"path": ADMIN, "action": to("b"), "policies": refs("auth")},
    ]
    start_with_backends(ferryman, backends, *basic_auth(), vs("cafe", "cafe.test", routes))
    assert ferryman.get("cafe.test", "/admin/a/b").status == 401
    assert served_by(ferryman, "cafe.test", "/other") == "a"
    seen = backends.hits
    assert ferryman.get("cafe.test", LONG).status == 500
    assert backends.hits == seen
    wait_logged(ferryman, "route", ADMIN[2:])


def test_a_module_route_regex_that_cannot_run_answers_500(
    either_fast_path: Ferryman, backends: Backends
) -> None:
    ferryman = either_fast_path
    routes = [{"path": "/", "action": to("a")}, {"path": "~ " + NESTED, "action": to("b")}]
    start_with_backends(ferryman, backends, vs("cafe", "cafe.test", routes))
    assert served_by(ferryman, "cafe.test", "/aaa") == "b"
    assert served_by(ferryman, "cafe.test", "/aaa!") == "a"
    seen = backends.hits
    assert ferryman.get("cafe.test", BACKTRACKING).status == 500
    assert backends.hits == seen
    # The module answers it itself, where its fast path runs.
    wait_logged(ferryman, "route", NESTED, by_module=in_module(ferryman))


def test_a_negated_condition_that_cannot_run_answers_500(
    either_fast_path: Ferryman, backends: Backends
) -> None:
    ferryman = either_fast_path
    matches = [
        {"conditions": [{"variable": "$request_uri", "value": "!~" + NESTED}], "action": to("b")}
    ]
    routes = [{"path": "/", "action": to("a"), "matches": matches}]
    start_with_backends(ferryman, backends, vs("cafe", "cafe.test", routes))
    assert served_by(ferryman, "cafe.test", "/aaa") == "a"
    assert served_by(ferryman, "cafe.test", "/aaa!") == "b"
    seen = backends.hits
    assert ferryman.get("cafe.test", BACKTRACKING).status == 500
    assert backends.hits == seen
    wait_logged(ferryman, "condition", NESTED, by_module=in_module(ferryman))


def test_a_rate_limit_tier_regex_that_cannot_run_answers_500(
    either_fast_path: Ferryman, backends: Backends
) -> None:
    ferryman = either_fast_path
    tier = {"variables": [{"name": "$request_uri", "match": "~" + NESTED}]}
    start_with_backends(
        ferryman,
        backends,
        rate_limit("strict", rate="1r/m", condition=tier),
        vs("cafe", "cafe.test", [{"path": "/", "action": to("a")}], policies=refs("strict")),
    )
    assert [status(ferryman, "cafe.test", "/aaa") for _ in range(2)] == [200, 503]
    assert [status(ferryman, "cafe.test", "/aaa!") for _ in range(2)] == [200, 200]
    seen = backends.hits
    assert ferryman.get("cafe.test", BACKTRACKING).status == 500
    assert backends.hits == seen
    wait_logged(ferryman, "rate-limit tier", NESTED)


def test_an_ingress_path_regex_that_cannot_run_answers_500(
    either_fast_path: Ferryman, backends: Backends
) -> None:
    ferryman = either_fast_path
    ferryman.write("tea", service_with_backends("tea", [backends.start("t")]))
    ferryman.write("app", service_with_backends("app", [backends.start("a")]))
    paths = (path(NESTED[1:], "tea"), path("/", "app"))
    annotations = {"nginx.org/path-regex": "case_sensitive"}
    ferryman.write("ing", ingress("ing", [rule("cafe.test", *paths)], annotations=annotations))
    ferryman.start()
    assert served_by(ferryman, "cafe.test", "/aaa") == "t"
    assert served_by(ferryman, "cafe.test", "/aaa!") == "a"
    seen = backends.hits
    assert ferryman.get("cafe.test", BACKTRACKING).status == 500
    assert backends.hits == seen
    wait_logged(ferryman, "route", NESTED[1:], by_module=in_module(ferryman))
