"""ingress-nginx's canary Ingresses through real NGINX and real backends: the
header, cookie and weight rules in ingress-nginx's precedence (its
docs/user-guide/nginx-configuration/annotations.md "Canary"), the canary's
Events, and no reload for any change (kinds/ingress/records/canary_host.py)."""

from __future__ import annotations

from typing import Any

import pytest

from testkit.annotated_ingress import HOST, annotated, last, start
from testkit.harness import (
    Backends,
    Ferryman,
    backend,
    eventually,
    ingress,
    path,
    rule,
    service_with_backends,
)

P = "nginx.ingress.kubernetes.io/"


def canary(annotations: dict[str, str], name: str = "canary", p: str = "/") -> dict[str, Any]:
    return ingress(
        name,
        [rule(HOST, path(p, "canary-svc"))],
        annotations={P + "canary": "true", **annotations},
    )


def begin(f: Ferryman, backends: Backends, *docs: dict[str, Any]) -> None:
    """The main Ingress (``ann``: / to app, backend a) and a canary Service
    (backend c), then ``docs``."""
    f.write("canary-svc", service_with_backends("canary-svc", [backends.start("c")]))
    start(f, backends, annotated({}), *docs)


def who(f: Ferryman, headers: dict[str, str] | None = None) -> str | None:
    return f.get(HOST, "/x", headers=headers).served_by


def test_header_then_cookie_then_weight(either_fast_path: Ferryman, backends: Backends) -> None:
    f = either_fast_path
    begin(
        f,
        backends,
        canary({P + "canary-by-header": "X-Canary", P + "canary-by-cookie": "beta"}),
    )
    eventually(lambda: last(f, "canary")["reason"] == "AddedOrUpdated", 10, "canary served")
    assert f"canary of {HOST}/ of default/ann" in last(f, "canary")["message"]
    assert last(f)["reason"] == "AddedOrUpdated"
    assert who(f) == "a"  # weight 0
    assert who(f, {"X-Canary": "always"}) == "c"
    assert who(f, {"X-Canary": "never", "Cookie": "beta=always"}) == "a"  # the header first
    assert who(f, {"X-Canary": "Always"}) == "a"  # compared exactly
    assert who(f, {"Cookie": "beta=always"}) == "c"
    assert who(f, {"X-Canary": "maybe", "Cookie": "beta=always"}) == "c"  # then the cookie
    assert who(f, {"Cookie": "beta=never"}) == "a"
    # A header value: only that value goes to the canary; always is any value.
    f.write(
        "doc1", canary({P + "canary-by-header": "X-Canary", P + "canary-by-header-value": "v2"})
    )
    eventually(lambda: who(f, {"X-Canary": "v2"}) == "c", 10, "header value")
    assert who(f, {"X-Canary": "always"}) == "a"
    assert who(f, {"X-Canary": "v2x"}) == "a"
    # A pattern, searched in the value.
    f.write(
        "doc1",
        canary({P + "canary-by-header": "X-Canary", P + "canary-by-header-pattern": "^v[0-9]+$"}),
    )
    eventually(lambda: who(f, {"X-Canary": "v17"}) == "c", 10, "header pattern")
    assert who(f, {"X-Canary": "v1x"}) == "a"
    # Weight 100: every request without a header saying never.
    f.write("doc1", canary({P + "canary-weight": "100", P + "canary-by-header": "X-Canary"}))
    eventually(lambda: who(f) == "c", 10, "weight 100")
    assert all(who(f) == "c" for _ in range(20))
    assert who(f, {"X-Canary": "never"}) == "a"
    assert f.reloads() == 1


def test_weight_splits_the_traffic(ferryman: Ferryman, backends: Backends) -> None:
    f = ferryman
    begin(f, backends, canary({P + "canary-weight": "500", P + "canary-weight-total": "1000"}))
    eventually(lambda: last(f, "canary")["reason"] == "AddedOrUpdated", 10, "canary served")
    to_canary = sum(who(f) == "c" for _ in range(200))
    # 50%: 200 draws fall within 100 +- 40 but for a chance under one in a million.
    assert 60 <= to_canary <= 140, to_canary
    # Weight 0: all to the main.
    f.write("doc1", canary({P + "canary-weight": "0"}))
    eventually(lambda: all(who(f) == "a" for _ in range(20)), 10, "weight 0")
    # A share that is not a whole percent: rounded, said.
    f.write("doc1", canary({P + "canary-weight": "1", P + "canary-weight-total": "1000"}))
    eventually(lambda: last(f, "canary")["reason"] == "AddedOrUpdatedWithWarning", 10, "rounded")
    assert f"{P}canary-weight: 1/1000 served as 1%" in last(f, "canary")["message"]
    assert f.reloads() == 1


def test_a_canary_needs_its_main(ferryman: Ferryman, backends: Backends) -> None:
    """No main for its path: not served, said; a second canary of a path is
    left out, said; a canary removed: all to the main; the main added later
    takes its canary."""
    f = ferryman
    begin(
        f,
        backends,
        canary({P + "canary-by-header": "X-Canary"}),
        canary({P + "canary-weight": "100"}, name="lonely", p="/lonely"),
        canary({P + "canary-weight": "0", P + "rewrite-target": "/"}, name="second"),
    )
    eventually(lambda: who(f, {"X-Canary": "always"}) == "c", 10, "canary served")
    eventually(lambda: last(f, "lonely")["reason"] == "Rejected", 10, "lonely said")
    eventually(lambda: last(f, "second")["reason"] == "Rejected", 10, "second said")
    lonely = last(f, "lonely")
    assert lonely["type"] == "Warning"
    assert lonely["message"] == (
        f"default/lonely was rejected: canary not served: {HOST}/lonely: no main Ingress serves it"
    )
    assert f.get(HOST, "/lonely").served_by == "a"  # the main's / takes it
    second = last(f, "second")
    assert second["reason"] == "Rejected"
    assert (
        f"{HOST}/: default/canary is already its canary (one canary per rule)"
        in (second["message"])
    )
    # The main gains /lonely: the lonely canary joins it.
    f.write("doc0", annotated({}, path("/", "app"), path("/lonely", "app")))
    eventually(lambda: last(f, "lonely")["reason"] == "AddedOrUpdated", 10, "lonely joins")
    eventually(lambda: f.get(HOST, "/lonely").served_by == "c", 10, "lonely served")
    # The first canary removed: the second one joins (its other annotations said).
    f.remove("doc1")
    eventually(lambda: last(f, "second")["type"] == "Warning", 10, "second")
    eventually(
        lambda: last(f, "second")["reason"] == "AddedOrUpdatedWithWarning", 10, "second joins"
    )
    assert f"{P}rewrite-target ignored on a canary Ingress" in last(f, "second")["message"]
    eventually(lambda: who(f, {"X-Canary": "always"}) == "a", 10, "all to the main")
    assert all(who(f) == "a" for _ in range(10))
    # A canary of a defaultBackend: not served yet, said.
    f.write(
        "doc4",
        ingress(
            "fallback",
            default_backend=backend("canary-svc"),
            annotations={P + "canary": "true"},
        ),
    )
    eventually(lambda: last(f, "fallback")["reason"] == "Rejected", 10, "fallback")
    assert "a canary of a defaultBackend is not served yet" in last(f, "fallback")["message"]
    # The main removed: its canaries are not served.
    f.remove("doc0")
    eventually(lambda: last(f, "second")["reason"] == "Rejected", 10, "no main")
    assert f.get(HOST, "/x").status == 404
    assert f.reloads() == 1


@pytest.mark.flavours("nginx", "nginx-1.30", "angie")
def test_a_canary_is_served_on_every_server(ferryman: Ferryman, backends: Backends) -> None:
    """The matches and splits are the module's F record's (and the Lua slow
    path's beside it), which every server runs."""
    f = ferryman
    begin(f, backends, canary({P + "canary-weight": "100"}))
    eventually(lambda: who(f) == "c", 10, "canary served")
    f.last_event("canary", "AddedOrUpdated")  # written after the push that serves it
    assert f.reloads() == 1
