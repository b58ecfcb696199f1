"""NIC's Policies on VirtualServers through real NGINX, with real traffic:
which policy applies where (spec vs route), missing and invalid policies
(500 and NIC's Warning), each kind enforcing, and no reload for any Policy
or attachment change."""

from __future__ import annotations

from typing import Any

from tests.integration.harness import (
    Backends,
    Ferryman,
    eventually,
    served_by,
)
from tests.integration.test_virtualserver import start_with_backends, to, vs


def policy(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "Policy",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def refs(*names: str) -> list[dict[str, str]]:
    return [{"name": n} for n in names]


def status(f: Ferryman, host: str, p: str = "/", **kw: Any) -> int:
    return f.get(host, p, **kw).status


def last_event(f: Ferryman, name: str, kind: str = "VirtualServer") -> dict[str, str]:
    return [e for e in f.events_for(name) if e.get("kind") == kind][-1]


def test_access_control_allow_and_deny(ferryman: Ferryman, backends: Backends) -> None:
    routes = [
        {"path": "/", "action": to("a")},
        {"path": "/open", "action": to("b"), "policies": refs("let-local")},
    ]
    start_with_backends(
        ferryman,
        backends,
        policy("deny-local", accessControl={"deny": ["127.0.0.0/8"]}),
        policy("let-local", accessControl={"allow": ["127.0.0.1"]}),
        vs("cafe", "cafe.test", routes, policies=refs("deny-local")),
    )
    # The VirtualServer's policy on the route without its own, and on paths no route has.
    assert status(ferryman, "cafe.test", "/") == 403
    # A route's accessControl replaces the VirtualServer's (NGINX's inheritance).
    assert served_by(ferryman, "cafe.test", "/open") == "b"
    assert last_event(ferryman, "cafe")["reason"] == "AddedOrUpdated"


def test_missing_policy_answers_500_with_nics_warning(
    ferryman: Ferryman, backends: Backends
) -> None:
    routes = [
        {"path": "/", "action": to("a")},
        {"path": "/guarded", "action": to("b"), "policies": refs("later")},
    ]
    start_with_backends(ferryman, backends, vs("cafe", "cafe.test", routes))
    assert status(ferryman, "cafe.test", "/guarded") == 500
    assert served_by(ferryman, "cafe.test", "/") == "a"  # other routes serve
    event = last_event(ferryman, "cafe")
    assert event["reason"] == "AddedOrUpdatedWithWarning"
    assert event["message"] == (
        "Configuration for default/cafe was added or updated with warning(s): "
        "Policy default/later is missing or invalid"
    )
    # Created: its user is translated again, with no reload.
    ferryman.write("later", policy("later", accessControl={"allow": ["10.0.0.0/8"]}))
    eventually(lambda: status(ferryman, "cafe.test", "/guarded") == 403, 10, "enforced")
    assert last_event(ferryman, "cafe")["reason"] == "AddedOrUpdated"
    # Invalid: as missing.
    ferryman.write("later", policy("later", accessControl={"allow": ["10.0.0.0/33"]}))
    eventually(lambda: status(ferryman, "cafe.test", "/guarded") == 500, 10, "invalid")
    pol = last_event(ferryman, "later", "Policy")
    assert pol["reason"] == "Rejected"
    assert pol["message"].startswith("Policy default/later is invalid and was rejected: ")
    # Edited to allow us, then deleted.
    ferryman.write("later", policy("later", accessControl={"allow": ["127.0.0.0/8"]}))
    eventually(lambda: served_by(ferryman, "cafe.test", "/guarded") == "b", 10, "allowed")
    assert last_event(ferryman, "later", "Policy")["message"] == (
        "Policy default/later was added or updated"
    )
    ferryman.remove("later")
    eventually(lambda: status(ferryman, "cafe.test", "/guarded") == 500, 10, "deleted")
    assert ferryman.reloads() == 1  # the start-up reload only


def test_a_missing_spec_policy_fails_the_whole_host(ferryman: Ferryman, backends: Backends) -> None:
    routes = [{"path": "/", "action": to("a")}]
    start_with_backends(ferryman, backends, vs("cafe", "cafe.test", routes, policies=refs("gone")))
    # NIC's server-level "return 500": every path, routed or not.
    assert status(ferryman, "cafe.test", "/") == 500
    assert status(ferryman, "cafe.test", "/nowhere") == 500
    assert "Policy default/gone is missing or invalid" in last_event(ferryman, "cafe")["message"]
