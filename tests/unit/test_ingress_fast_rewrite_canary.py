"""ingress-nginx's rewrite-target and canary on the module's path (issue 30):
a route with ``rewrite-target`` (the whole URI on a plain path, the
location's groups on a ``use-regex`` one), a canary by header, cookie or
weight, and a source allowlist has an F record location the module serves
(``w``/``r`` rewrites, ``ngx_http_ferryman_vs_rewrite.c``; the canary as the
VirtualServer engine's matches and split), where it was the slow path's."""

from __future__ import annotations

from ferryman.configs.record_text import b64
from ferryman.kinds.ingress.parse.ingress import Ingress
from ferryman.kinds.ingress.records.canary_host import joined_paths
from ferryman.kinds.ingress.records.hosts import ingress_records
from ferryman.kinds.ingress.records.virtual_hosts import virtual_hosts
from ferryman.wire.push import record_problem
from testkit.vs_fast import locations
from tests.unit.test_ingress_nginx_canary_host import HOST, P, canary, ing

REGEX = "/p0(/|$)(.*)"


def _fast(main: Ingress, canaries: tuple[Ingress, ...] = ()) -> str | None:
    vhosts, _ = virtual_hosts(main, [HOST], {})
    joined = {HOST: joined_paths(main, HOST, list(canaries))}
    out = ingress_records(main, vhosts, None, "ferryman", {}, canaries=joined)  # type: ignore[arg-type]
    (written,) = out.written
    fast: str | None = written.fast
    assert fast is None or record_problem(("F", HOST), fast) is None
    return fast


def _bench(**kw: str) -> tuple[Ingress, Ingress]:
    annotations = {
        P + "use-regex": "true",
        P + "rewrite-target": "/$2",
        P + "whitelist-source-range": "127.0.0.0/8",
    }
    main = ing("main", {REGEX: "main"}, annotations, path_type="ImplementationSpecific")
    c = canary("c", {REGEX: "new"}, path_type="ImplementationSpecific", use_regex="true", **kw)
    return main, c


def test_the_bench_route_is_the_modules() -> None:
    main, c = _bench(canary_by_header="X-Canary")
    fast = _fast(main, (c,))
    assert locations(fast) == ["r"]
    assert fast is not None
    # The location's regex (caseless, as use-regex's), its target, the allow
    # list, then "always" and "never" as matches and the main by default.
    always = f"1 0 r {b64('http_x_canary')} {b64('^always$')} 1 100 2"
    never = f"1 0 r {b64('http_x_canary')} {b64('^never$')} 1 100 1"
    head = f"l I {b64('^' + REGEX)} 0 r {b64('/$2')} a 1 1 4.7f000000.8 f"
    assert fast.endswith(f"{head} 2 {always} {never} 1 100 1")


def test_header_value_pattern_cookie_and_weight() -> None:
    main, c = _bench(canary_by_header="X-C", canary_by_header_value="yes")
    fast = _fast(main, (c,))
    assert fast is not None and f"1 0 r {b64('http_x_c')} {b64('^yes$')} 1 100 2" in fast
    main, c = _bench(canary_by_header="X-C", canary_by_header_pattern="^b(eta)?$")
    fast = _fast(main, (c,))
    assert fast is not None and f"1 0 r {b64('http_x_c')} {b64('^b(eta)?$')} 1 100 2" in fast
    main, c = _bench(canary_by_cookie="ck", canary_weight="30")
    fast = _fast(main, (c,))
    assert fast is not None
    assert f"1 0 r {b64('cookie_ck')} {b64('^always$')} 1 100 2" in fast
    assert fast.endswith(" 2 70 1 30 2")


def test_rewrite_target_on_a_plain_path_is_the_whole_uri() -> None:
    # nginx.org's on a Prefix path: "= /app" and "/app/", each rewritten to
    # the target less its groups.
    main = ing("main", {"/app": "main"}, {"nginx.org/rewrite-target": "/x/$1"})
    fast = _fast(main)
    assert locations(fast) == ["w", "w"]
    assert fast is not None and f" 0 w {b64('/x/')} f 0 1 100 1" in fast
    # ingress-nginx's makes the path a regex whose groups the target reads.
    fast = _fast(ing("main", {"/app": "main"}, {P + "rewrite-target": "/x/$1"}))
    assert fast is not None and f"l I {b64('^/app')} 0 r {b64('/x/$1')} f " in fast


def test_rewrites_the_module_would_make_otherwise_stay_slow() -> None:
    # nginx.org/rewrites replaces the prefix: the slow path's.
    assert (
        _fast(ing("main", {"/app": "s"}, {"nginx.org/rewrites": "serviceName=s rewrite=/b"}))
        is None
    )
