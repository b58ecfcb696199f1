"""ferryman.resources.readiness_gate: which pods a readiness gate is for."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ferryman.resources.readiness_gate import gate_type, gated_by, opted_in, selects
from ferryman.resources.service import parse_service
from testkit.controller_kit import Kit
from testkit.harness import ingress, path, rule

LABELS = st.dictionaries(st.sampled_from("abc"), st.sampled_from("xyz"), max_size=3)


def svc(name: str, selector: object, namespace: str = "ns") -> dict[str, Any]:
    spec: dict[str, Any] = {"ports": [{"port": 80}]}
    if selector is not None:
        spec["selector"] = selector
    return {"kind": "Service", "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def test_the_gate_names_the_class() -> None:
    assert gate_type("ferryman") == "target-health.ferryman.io/ferryman"


def test_only_the_enabled_label_opts_a_namespace_in() -> None:
    assert opted_in({"ferryman.io/pod-readiness-gate-inject": "enabled"})
    assert not opted_in({"ferryman.io/pod-readiness-gate-inject": "disabled"})
    assert not opted_in(None)


@given(LABELS, LABELS)
def test_a_selector_matches_pods_carrying_all_its_pairs(selector: Any, labels: Any) -> None:
    service = parse_service(svc("web", selector))
    expected = bool(selector) and selector.items() <= labels.items()
    assert selects(service, labels) == expected


def test_a_service_without_a_usable_selector_selects_no_pod() -> None:
    for selector in (None, {}, {"app": 5}, ["app"]):
        assert not selects(parse_service(svc("web", selector)), {"app": "web"})


def test_gated_by_lists_the_services_that_select_the_pod() -> None:
    services = [parse_service(svc("a", {"app": "web"})), parse_service(svc("b", {"app": "db"}))]
    assert [s.name for s in gated_by(services, {"app": "web", "pod": "1"})] == ["a"]


def test_the_store_keeps_a_services_selector() -> None:
    kit = Kit(Path("/nonexistent"))
    kit.add(svc("web", {"app": "web"}))
    stored = kit.store.get("Service", "ns", "web")
    assert stored is not None
    assert parse_service(stored).selector == {"app": "web"}


def test_served_services_are_those_a_served_ingress_routes_to(tmp_path: Path) -> None:
    kit = Kit(tmp_path)
    ing = ingress("web", [rule("a.example.com", path("/", "web"))], namespace="ns")
    kit.add(svc("web", {"app": "web"}), svc("idle", {"app": "idle"}), ing)
    asyncio.run(kit.drain())
    assert kit.controller.served_services("ns") == {"web"}
    assert kit.controller.served_services("other") == frozenset()
