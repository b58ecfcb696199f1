"""The NIC resource parsers, fed random shapes and mutations of valid objects: they return
problems, never raise, and never hand out a resource together with problems."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ferryman.kinds.policy.parse.policy import parse_policy
from ferryman.kinds.virtualserver.parse.virtualserver import parse_virtual_server
from ferryman.kinds.virtualserver.parse.virtualserverroute import parse_virtual_server_route
from ferryman.resources.nic_fields import Parsed
from testkit.nic_fixtures import POLICIES, VIRTUAL_SERVER, VIRTUAL_SERVER_ROUTE
from testkit.strategies import mutations, yaml_values

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CASES: list[tuple[Callable[[Mapping[str, Any]], Parsed[Any]], dict[str, Any]]] = [
    (parse_virtual_server, VIRTUAL_SERVER),
    (parse_virtual_server_route, VIRTUAL_SERVER_ROUTE),
    *((parse_policy, p) for p in POLICIES),
]


def _consistent(parsed: Parsed[Any]) -> None:
    assert (parsed.resource is None) == bool(parsed.problems)
    for problem in parsed.problems:
        str(problem)


@pytest.mark.parametrize(("parse", "valid"), CASES, ids=lambda c: getattr(c, "__name__", ""))
@FUZZ
@given(data=st.data())
def test_mutations_give_problems_not_exceptions(
    parse: Callable[[Mapping[str, Any]], Parsed[Any]], valid: dict[str, Any], data: st.DataObject
) -> None:
    _consistent(parse(data.draw(mutations(valid, max_changes=4))))


@FUZZ
@given(spec=yaml_values)
def test_random_specs_give_problems_not_exceptions(spec: Any) -> None:
    for parse, valid in CASES[:3]:
        _consistent(parse({**valid, "spec": spec}))
