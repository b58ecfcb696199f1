"""Hypothesis strategies of VirtualServer routes (prefix and regex) and requests, for
the VirtualServer routing properties.

Moved from tests/integration/test_vs_router_property.py, whose tests and others share them."""

from __future__ import annotations

import re

from hypothesis import strategies as st

SERVICES = ("a", "b", "c")


MARKER_SERVICE = "d"


SEGMENTS = ["a", "b", "ab", "A", ""]


# Regular expressions both PCRE and Python's re read alike.
REGEXES = ["a$", "^/a", "b/", "AB", "/b$", "^/ab?/", "a.b"]


def _join(segments: list[str], slash: bool) -> str:
    return "/" + "/".join(segments) + ("/" if slash and segments else "")


_plain = st.builds(_join, st.lists(st.sampled_from(SEGMENTS), max_size=3), st.booleans()).map(
    lambda p: re.sub("/+", "/", p)
)


@st.composite
def _route(draw: st.DrawFn) -> tuple[str, str]:
    modifier = draw(st.sampled_from(["", "=", "^~", "~", "~*"]))
    value = draw(st.sampled_from(REGEXES)) if modifier.startswith("~") else draw(_plain)
    return modifier + value, draw(st.sampled_from(SERVICES))


_requests = st.lists(
    st.builds(_join, st.lists(st.sampled_from([*SEGMENTS, "x", "abc"]), max_size=4), st.booleans()),
    min_size=30,
    max_size=30,
)
