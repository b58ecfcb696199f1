"""The Ingress routing property: drawn rules and requests, the route ``routes.match``
predicts, served by real NGINX.

Moved from tests/integration/test_router_property.py, whose tests and others share them."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ferryman.configs.routes import match, route_tables
from ferryman.kinds.ingress.parse.ingress import parse_ingress
from ferryman.kinds.ingress.records.virtual_hosts import virtual_hosts
from testkit import router_kit as kit
from testkit.harness import (
    Backends,
    Ferryman,
    backend,
    fast_path_counts,
    ingress,
    path,
    rule,
)

HOST = "router.example.com"


SERVICES = ("a", "b", "c")  # what rules and the default backend route to


MARKER_SERVICE = "d"  # only the marker path of the current example


SEGMENTS = ["a", "b", "ab", "c", ""]


PATH_TYPES = ["Exact", "Prefix", "ImplementationSpecific"]


def _join(segments: list[str], slash: bool) -> str:
    return "/" + "/".join(segments) + ("/" if slash and segments else "")


_raw_paths = st.builds(_join, st.lists(st.sampled_from(SEGMENTS), max_size=3), st.booleans())


@st.composite
def _rule_path(draw: st.DrawFn) -> tuple[str, str, str]:
    path_type = draw(st.sampled_from(PATH_TYPES))
    p = draw(_raw_paths)
    if path_type != "ImplementationSpecific":
        # The API server refuses "//" in Exact and Prefix paths; ImplementationSpecific
        # keeps it (such a rule can never match: NGINX merges slashes in the URI).
        p = re.sub("/+", "/", p)
    return p, path_type, draw(st.sampled_from(SERVICES))


_rules = st.lists(_rule_path(), min_size=10, max_size=25)


_requests = st.lists(
    st.builds(
        _join,
        st.lists(st.sampled_from([*SEGMENTS, "x", "abc"]), max_size=4),
        st.booleans(),
    ),
    min_size=30,
    max_size=30,
)


def manifest(rules: list[tuple[str, str, str]], default: str | None, marker: str) -> dict[str, Any]:
    paths = [path(p, svc, t) for p, t, svc in rules]
    paths.append(path(marker, MARKER_SERVICE, "Exact"))
    return ingress(
        "router",
        [rule(HOST, *paths)],
        default_backend=backend(default) if default else None,
    )


def predicted(obj: dict[str, Any], request: str) -> str:
    """What ``match`` picks for the URI NGINX routes on (slashes merged)."""
    (vh,), _ = virtual_hosts(parse_ingress(obj), [HOST], {})
    exact, prefix = route_tables(vh.routes)
    key = match(exact, prefix, vh.default_backend, re.sub("/+", "/", request))
    return "404" if key is None else key.split("/")[1].split(":")[0]


Dress = Callable[[dict[str, Any]], dict[str, Any]]


# The examples of every Ingress router test: rules, a default backend or none, requests.
drawn = given(
    rules=_rules, default=st.one_of(st.none(), st.sampled_from(SERVICES)), requests=_requests
)


def _as_is(obj: dict[str, Any]) -> dict[str, Any]:
    return obj


def serve_router(
    f: Ferryman, backends: Backends, dress: Dress = _as_is
) -> Iterator[tuple[Ferryman, kit.HostClient]]:
    """A router fixture's body: ``dress`` adds to each Ingress what the test is about."""
    f.write("ing", dress(manifest([("/", "Prefix", "a")], None, "/marker-start")))
    yield from kit.serve(f, backends, (*SERVICES, MARKER_SERVICE), kit.HostClient(f, HOST))


def check_example(
    f: Ferryman,
    client: kit.HostClient,
    rules: list[tuple[str, str, str]],
    default: str | None,
    requests: list[str],
    dress: Dress = _as_is,
) -> tuple[list[tuple[str, str, str]], tuple[float, float] | None]:
    """Writes the example's Ingress, waits until NGINX routes it, and checks
    that every answer is what ``match`` predicts: the rule paths and their
    neighbours, then the drawn requests. Returns the (request, predicted,
    answered) triples and, with the module loaded, how many requests it
    proxied and handed to the Lua slow path meanwhile."""
    marker = kit.new_marker()
    obj = dress(manifest(rules, default, marker))
    f.write("ing", obj)
    kit.await_marker(client, marker, MARKER_SERVICE)
    near = [p + s for p, _, _ in rules for s in ("", "/", "/x")]
    checked = list(dict.fromkeys([*near, *requests]))[:80]
    module = "--nginx-modules-dir" not in f.extra_args
    before = fast_path_counts(f) if module else None
    example = f"rules={rules} default={default}"
    answers = kit.check_answers(client, checked, lambda r: predicted(obj, r), example)
    if before is None:
        return answers, None
    after = fast_path_counts(f)
    return answers, (after[0] - before[0], after[1] - before[1])
