"""What the F-record tests share: a VirtualServer's F record as ferryman writes
it, the NGINX locations it holds, and mutations of one record (hypothesis) for
ngx_http_ferryman_module's parser.

Moved from tests/unit/test_vs_fast.py and the F-record tests of rate limits and
access control, which each had their copy."""

from __future__ import annotations

import base64
from typing import Any

from hypothesis import strategies as st

from ferryman.kinds.virtualserver.parse.virtualserver import parse_virtual_server
from ferryman.kinds.virtualserver.records.virtualserver import vs_records
from ferryman.wire.push import record_problem
from testkit.policy_objects import Objects


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode() if text else "-"


def locations(record: str | None) -> list[str]:
    """Each location item's fast/slow marker, in order."""
    assert record is not None
    tokens = record.split(" ")
    return [tokens[i + 4] for i, t in enumerate(tokens) if t == "l"]


def fast_record(routes: list[dict[str, Any]], *objs: dict[str, Any], **spec: Any) -> str | None:
    """The F record of VirtualServer ns/v (host v.example.com, upstream a) with
    ``routes`` and ``objs`` (its Policies) in the store; None: none."""
    obj = {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "VirtualServer",
        "metadata": {"name": "v", "namespace": "ns"},
        "spec": {
            "host": "v.example.com",
            "upstreams": [{"name": "a", "service": "a", "port": 80}],
            "routes": routes,
            **spec,
        },
    }
    parsed = parse_virtual_server(obj)
    assert parsed.problems == () and parsed.resource is not None
    record = vs_records(parsed.resource, None, reads=Objects(*objs), ingress_class="ferryman").fast
    assert record is None or record_problem(("F", "v.example.com"), record) is None
    return record


def mutated(base: str, tokens: list[str]) -> st.SearchStrategy[str]:
    """``base`` with 1-4 of its tokens replaced (by one of ``tokens``, or
    shortened, or lengthened) and cut to 1-400 characters."""

    @st.composite
    def records(draw: st.DrawFn) -> str:
        parts = base.split(" ")
        for _ in range(draw(st.integers(1, 4))):
            i = draw(st.integers(0, len(parts) - 1))
            parts[i] = draw(st.sampled_from([*tokens, parts[i][:-1], parts[i] + "x"]))
        return " ".join(parts)[: draw(st.integers(1, 400))]

    return records()
