"""The push channel's encoding (dataplane/__init__.py) and NGINX's answer (nginx.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferryman.dataplane import PushResult
from ferryman.dataplane.nginx_messages import parse_push_answer
from ferryman.wire.push import push_body, push_order, record_problem

CERT = "TUlJQg==\tTUlJRQ=="


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (("H", "a.test"), "- 0 - rr:1:10 P|/|ns/app:80"),
        (("E", "ns/app:80"), "10.0.0.1#80 [::1]#80"),
        (("C", "ns/tls@0123"), CERT),
        (("H", "gone.test"), ""),
        (("V", "vs.test"), "- U|ns/app:80|rr|1|10|-|-|-|0 R|P|Lw==|0||100:p.1.."),
    ],
)
def test_records_ferryman_writes_are_accepted(key: tuple[str, str], value: str) -> None:
    assert record_problem(key, value) is None


@pytest.mark.parametrize(
    ("key", "value", "problem"),
    [
        (("H", "a.test"), "- 0 -\nH\tevil.test\t- 0 -", "line break"),
        (("H", "a.test"), "- 0 - P|/a\tb|x", "tab"),
        (("E", "ns/app:80"), "10.0.0.1#80\r", "control character"),
        (("H", "a\tb"), "- 0 -", "key"),
        (("H", "a\nb"), "- 0 -", "key"),
        (("H", ""), "- 0 -", "key"),
        (("C", "ns/tls@0"), "TUlJQg==\tTUlJRQ==\tx", "line break, tab"),
        (("C", "ns/tls@0"), "TUlJQg==\nTUlJRQ==", "line break, tab"),
        (("Z", "a"), "b", "kind"),
    ],
)
def test_a_record_with_a_line_break_or_tab_is_refused(
    key: tuple[str, str], value: str, problem: str
) -> None:
    found = record_problem(key, value)
    assert found is not None and problem in found
    with pytest.raises(ValueError, match="cannot be pushed"):
        push_body(1, {key: value}, full=False)


@given(st.text(), st.text())
def test_no_encodable_record_can_add_a_line_or_field(key: str, value: str) -> None:
    if record_problem(("H", key), value) is None:
        body = push_body(7, {("H", key): value}, full=False)
        assert body.count("\n") == 2
        assert body.split("\n")[1].count("\t") == 2


def test_removals_go_first_then_endpoints_certificates_hosts() -> None:
    records = {
        ("H", "a"): "x",
        ("V", "a"): "- R|P|Lw==|0||100:p.1..",
        ("C", "c"): CERT,
        ("E", "e"): "1.1.1.1#1",
        ("H", "gone"): "",
        ("E", "e2"): "1.1.1.2#1",
    }
    assert list(push_order(records)) == [
        ("H", "gone"),
        ("E", "e"),
        ("E", "e2"),
        ("C", "c"),
        ("V", "a"),  # a VirtualServer's routing before its host's stub
        ("H", "a"),
    ]


def test_the_answer_names_refused_records_and_the_fill_ratio() -> None:
    answer = "12\nM\tdict\t0.915\nR\tH\thog.test\treserved\nR\tE\tns/a:80\tno_memory\n"
    assert parse_push_answer(answer) == PushResult(
        12,
        {("H", "hog.test"): "reserved", ("E", "ns/a:80"): "no_memory"},
        {"dict": 0.915},
    )
    assert parse_push_answer("3\n") == PushResult(3)


@pytest.mark.parametrize(
    "answer", ["", "bad header\n", "3\nwhat\n", "3\nM\tdict\tx\n", "3\nR\tH\n"]
)
def test_a_malformed_answer_is_none(answer: str) -> None:
    assert parse_push_answer(answer) is None
