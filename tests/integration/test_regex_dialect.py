"""A regular expression is accepted only when PCRE, which runs it, compiles it.

Python's ``re`` accepted ``\\u0061``; PCRE2 refuses the escape, so such a route
was reported ``AddedOrUpdated`` and never matched anything.
"""

from __future__ import annotations

import pytest

from testkit.harness import Backends, Ferryman, eventually, served_by
from testkit.virtualservers import start_with_backends, to, vs

pytestmark = pytest.mark.flavours("nginx")


def test_a_route_regex_pcre_refuses_is_rejected_with_pcres_reason(
    ferryman: Ferryman, backends: Backends
) -> None:
    good = vs("good", "good.test", [{"path": "~ ^/admin(/[a-z0-9]+)*/?$", "action": to("a")}])
    start_with_backends(ferryman, backends, good)
    bad = vs("bad", "bad.test", [{"path": "~ ^/admin\\u0061", "action": to("b")}])
    ferryman.write("bad", bad)
    event = eventually(lambda: ferryman.events_for("bad"), 60, "the rejection")[-1]
    assert event["reason"] == "Rejected", event
    assert event["message"] == (
        "VirtualServer default/bad was rejected with error: spec.routes[0].path: Invalid value: "
        '"~ ^/admin\\\\u0061": must be a valid regular expression: PCRE2 does not support '
        "\\F, \\L, \\l, \\N{name}, \\U, or \\u at offset 9"
    )
    assert served_by(ferryman, "good.test", "/admin/x") == "a"


def test_a_match_condition_regex_pcre_refuses_is_rejected(
    ferryman: Ferryman, backends: Backends
) -> None:
    match = {"conditions": [{"header": "x-v", "value": "!~^v(?^i)1"}], "action": to("b")}
    bad = vs("bad", "bad.test", [{"path": "/", "matches": [match], "action": to("a")}])
    start_with_backends(ferryman, backends, bad)
    event = eventually(lambda: ferryman.events_for("bad"), 60, "the rejection")[-1]
    assert event["reason"] == "Rejected", event
    assert "spec.routes[0].matches[0].conditions[0].value" in event["message"]
    assert "must be a valid regular expression" in event["message"]
