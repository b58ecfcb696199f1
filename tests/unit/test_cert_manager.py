"""A VirtualServer's tls.cert-manager: NIC's rules (resources/cert_manager.py),
the Certificate it asks for and what to write (certificates/decide.py)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferryman.certificates.decide import Wanted, certificate, plan
from ferryman.certificates.wanted import Asked
from ferryman.kinds.virtualserver.parse.virtualserver import parse_virtual_server
from ferryman.kinds.virtualserver.translate.virtualserver import asked_of
from ferryman.resources.cert_manager import CertManager, go_duration
from ferryman.resources.meta import ObjectRef


def _vs(cm: dict[str, Any] | None, secret: str = "tls") -> dict[str, Any]:
    tls: dict[str, Any] = {"secret": secret}
    if cm is not None:
        tls["cert-manager"] = cm
    return {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "VirtualServer",
        "metadata": {"name": "shop", "namespace": "default", "uid": "u1"},
        "spec": {
            "host": "shop.test",
            "tls": tls,
            "upstreams": [{"name": "up", "service": "tea", "port": 80}],
            "routes": [{"path": "/", "action": {"pass": "up"}}],
        },
    }


def test_parsed_with_nics_defaults() -> None:
    vs = parse_virtual_server(_vs({"cluster-issuer": "le"}), cert_manager=True).resource
    assert vs is not None and vs.tls is not None
    assert vs.tls.cert_manager == CertManager("le", "ClusterIssuer", "cert-manager.io")
    cm_field = {
        "issuer": "ca",
        "issuer-kind": "AWSPCAIssuer",
        "issuer-group": "awspca.cert-manager.io",
        "usages": "server auth, client auth",
        "issue-temp-cert": True,
    }
    vs = parse_virtual_server(_vs(cm_field), cert_manager=True).resource
    assert vs is not None and vs.tls is not None and vs.tls.cert_manager is not None
    cm = vs.tls.cert_manager
    assert (cm.issuer, cm.issuer_kind, cm.issuer_group) == (
        "ca",
        "AWSPCAIssuer",
        "awspca.cert-manager.io",
    )
    assert cm.usages == ("server auth", "client auth") and cm.issue_temp_cert


@pytest.mark.parametrize(
    ("cm", "secret", "enabled", "problem"),
    [
        ({"issuer": "a"}, "tls", False, "field requires cert-manager enablement"),
        ({"issuer": "a"}, "", True, "field requires TLS.Secret to be specified"),
        ({}, "tls", True, "either issuer or cluster-issuer must be set"),
        ({"issuer": "a", "cluster-issuer": "b"}, "tls", True, "may not be set"),
        ({"cluster-issuer": "b", "issuer-kind": "X"}, "tls", True, "neither issuer-kind"),
        ({"issuer": "a", "duration": "90d"}, "tls", True, "must be a duration"),
        ({"issuer": "a", "usages": "server auth,sign"}, "tls", True, "unknown key usage 'sign'"),
    ],
)
def test_nics_rules(cm: dict[str, Any], secret: str, enabled: bool, problem: str) -> None:
    parsed = parse_virtual_server(_vs(cm, secret), cert_manager=enabled)
    assert parsed.resource is None
    assert problem in parsed.message()


@given(st.from_regex(r"[0-9]{1,4}(h|m|s|ms)([0-9]{1,3}(m|s))?", fullmatch=True))
def test_go_durations(text: str) -> None:
    assert go_duration(text)


@pytest.mark.parametrize("text", ["", "90d", "1", "h", "1.5.h", "1hh"])
def test_not_go_durations(text: str) -> None:
    assert not go_duration(text)


def _wanted(**kw: Any) -> Wanted:
    cm = CertManager("le", "ClusterIssuer", "cert-manager.io", **kw)
    return Wanted("default", "shop", "u1", (("team", "a"),), "shop.test", "tls", cm)


def test_plan_creates_updates_leaves_foreign_and_deletes_what_is_no_longer_asked() -> None:
    w = _wanted()
    assert [a.verb for a in plan([w], [], {"u1": "shop"})] == ["create"]
    assert plan([w], [certificate(w)], {"u1": "shop"}) == []
    changed = _wanted(duration="2160h")
    (update,) = plan([changed], [certificate(w)], {"u1": "shop"})
    assert update.verb == "update" and update.body is not None
    assert update.body["spec"]["duration"] == "2160h"
    # Back without a duration: an update too (the field is dropped).
    assert [a.verb for a in plan([w], [certificate(changed)], {"u1": "shop"})] == ["update"]
    foreign = certificate(w)
    foreign["metadata"]["ownerReferences"] = []
    assert [a.verb for a in plan([w], [foreign], {"u1": "shop"})] == ["foreign"]
    # No longer asked for by a served VirtualServer: deleted; another
    # controller's VirtualServer's (an unknown uid): left alone.
    assert [(a.verb, a.vs) for a in plan([], [certificate(w)], {"u1": "shop"})] == [
        ("delete", "shop")
    ]
    assert plan([], [certificate(w)], {"u2": "other"}) == []


def test_asked_tells_the_writer_only_of_changes() -> None:
    asked, told = Asked(), []
    asked.changed = lambda: told.append(1)
    ref = ObjectRef("VirtualServer", "default", "shop")
    vs = parse_virtual_server(_vs({"cluster-issuer": "le"}), cert_manager=True).resource
    asked.set(ref, *asked_of(vs))
    asked.set(ref, *asked_of(vs))
    assert len(told) == 1 and [w.secret for w in asked.wanted()] == ["tls"]
    asked.set(ref, *asked_of(None))
    assert len(told) == 2 and asked.wanted() == [] and asked.served() == {}
