"""NIC's Policies on Ingresses (``nginx.org/policies``) through real NGINX, with
real traffic: the kinds NIC allows there enforced for every host of the
Ingress, the others and missing ones answering 500 with NIC's Warning, Policy
edits with no reload, and Ingresses without the annotation left on the fast
path."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from testkit import ingress_router as router
from testkit import router_kit as kit
from testkit.harness import (
    Backends,
    Ferryman,
    eventually,
    fast_path_counts,
    ingress,
    path,
    rule,
    served_by,
    service_with_backends,
)
from testkit.vs_policies import last_event, policy

GUARDED = "guarded.test"
PLAIN = "plain.test"


def guarded_ingress(name: str, host: str, policies: str, *paths: dict[str, Any]) -> dict[str, Any]:
    return ingress(
        name,
        [rule(host, *(paths or (path("/app", "app"),)))],
        annotations={"nginx.org/policies": policies},
    )


def start(f: Ferryman, backends: Backends, *docs: dict[str, Any]) -> None:
    f.write("svc", service_with_backends("app", [backends.start("pod0")]))
    f.write("ing-plain", ingress("plain", [rule(PLAIN, path("/", "app"))]))
    for i, doc in enumerate(docs):
        f.write(f"doc{i}", doc)
    f.start()


def status(f: Ferryman, host: str, p: str, **kw: Any) -> int:
    return f.get(host, p, **kw).status


def test_access_control_for_every_host_and_edits_without_reload(
    either_fast_path: Ferryman, backends: Backends
) -> None:
    f = either_fast_path
    start(
        f,
        backends,
        policy("local", accessControl={"deny": ["127.0.0.0/8"]}),
        guarded_ingress("cafe", GUARDED, "local"),
    )
    # NIC writes allow/deny into the server: routed paths and 404s alike.
    assert status(f, GUARDED, "/app") == 403
    assert status(f, GUARDED, "/nowhere") == 403
    assert served_by(f, PLAIN, "/app") == "pod0"  # another Ingress: untouched
    assert last_event(f, "cafe", "Ingress")["reason"] == "AddedOrUpdated"
    f.write("doc0", policy("local", accessControl={"allow": ["127.0.0.1"]}))
    eventually(lambda: served_by(f, GUARDED, "/app") == "pod0", 60, "allowed")
    assert status(f, GUARDED, "/nowhere") == 404
    f.write("doc0", policy("local", accessControl={"deny": ["127.0.0.0/8"]}))
    eventually(lambda: status(f, GUARDED, "/app") == 403, 60, "denied again")
    # The annotation removed: the host is routed as any other.
    f.write("doc1", ingress("cafe", [rule(GUARDED, path("/app", "app"))]))
    eventually(lambda: served_by(f, GUARDED, "/app") == "pod0", 60, "no policies")
    assert f.reloads() == 1  # the start-up reload only


def test_missing_policy_fails_every_host_with_nics_warning(
    either_fast_path: Ferryman, backends: Backends
) -> None:
    f = either_fast_path
    start(
        f,
        backends,
        ingress(
            "cafe",
            [rule(GUARDED, path("/app", "app")), rule("other.test", path("/", "app"))],
            annotations={"nginx.org/policies": "later"},
        ),
    )
    assert status(f, GUARDED, "/app") == 500
    assert status(f, "other.test", "/") == 500
    assert status(f, GUARDED, "/nowhere") == 500  # NIC's server-level return 500
    event = last_event(f, "cafe", "Ingress")
    assert event["reason"] == "AddedOrUpdatedWithWarning"
    assert event["message"] == (
        "Configuration for default/cafe was added or updated with warning(s): "
        "Policy default/later is missing or invalid"
    )
    f.write("doc1", policy("later", accessControl={"allow": ["10.0.0.0/8"]}))
    eventually(lambda: status(f, GUARDED, "/app") == 403, 60, "enforced")
    assert status(f, "other.test", "/") == 403
    assert last_event(f, "cafe", "Ingress")["reason"] == "AddedOrUpdated"
    f.remove("doc1")
    eventually(lambda: status(f, GUARDED, "/app") == 500, 60, "deleted")
    assert f.reloads() == 1


def test_kinds_nic_does_not_allow_on_ingress_answer_500(
    ferryman: Ferryman, backends: Backends
) -> None:
    rate = {"rate": "1r/s", "key": "${binary_remote_addr}", "zoneSize": "10M"}
    keys = {"suppliedIn": {"header": ["X-API-Key"]}, "clientSecret": "keys"}
    start(
        ferryman,
        backends,
        policy("open", accessControl={"allow": ["127.0.0.1"]}),
        policy("rl", rateLimit=rate),
        policy("basic", basicAuth={"secret": "htpasswd"}),
        policy("api", apiKey=keys),
        guarded_ingress("rl", "rl.test", "open, rl"),
        guarded_ingress("basic", "basic.test", "basic"),
        guarded_ingress("api", "api.test", "default/api"),
    )
    # NIC's IsPolicySupportedOnIngress: accessControl, cors, externalAuth,
    # ingressMTLS, egressMTLS, waf; a rate limit, basic auth or API key is
    # attached through VirtualServers or Ingress annotations instead.
    for name, host, key in [
        ("rl", "rl.test", "default/rl"),
        ("basic", "basic.test", "default/basic"),
        ("api", "api.test", "default/api"),
    ]:
        assert [status(ferryman, host, "/app") for _ in range(3)] == [500] * 3
        assert last_event(ferryman, name, "Ingress")["message"] == (
            f"Configuration for default/{name} was added or updated with warning(s): "
            f"Policy {key} is not supported on Ingress resources"
        )


def test_ingress_kinds_fail_closed_where_not_enforced(
    ferryman: Ferryman, backends: Backends
) -> None:
    """NIC allows ingressMTLS, egressMTLS and externalAuth on an Ingress, and
    ferryman enforces them there as on VirtualServers: ingressMTLS needs TLS on
    the Ingress (NIC's warning, 500); an egressMTLS whose Secret is missing
    answers 500 rather than proxy without the client certificate asked for;
    externalAuth asks its Service (here the echo backend, which answers 200)."""
    auth = {"authURI": "/auth", "authServiceName": "app"}
    start(
        ferryman,
        backends,
        policy("mtls", ingressMTLS={"clientCertSecret": "client-ca"}),
        policy("egress", egressMTLS={"tlsSecret": "client"}),
        policy("ext", externalAuth=auth),
        guarded_ingress("mtls", "mtls.test", "mtls"),
        guarded_ingress("egress", "egress.test", "egress"),
        guarded_ingress("ext", "ext.test", "ext"),
    )
    assert status(ferryman, "mtls.test", "/app") == 500
    assert last_event(ferryman, "mtls", "Ingress")["message"].endswith(
        "TLS must be enabled for IngressMTLS policy default/mtls"
    )
    assert status(ferryman, "egress.test", "/app") == 500
    assert last_event(ferryman, "egress", "Ingress")["message"].endswith(
        "EgressMTLS policy default/egress references an invalid secret default/client: "
        "secret doesn't exist"
    )
    assert served_by(ferryman, "ext.test", "/app") == "pod0"


def test_cors_on_routed_answers_only(ferryman: Ferryman, backends: Backends) -> None:
    start(
        ferryman,
        backends,
        policy("cors", cors={"allowOrigin": ["https://site.test"], "maxAge": 60}),
        guarded_ingress("cafe", GUARDED, "cors"),
    )
    origin = {"Origin": "https://site.test"}
    r = ferryman.get(GUARDED, "/app", headers=origin)
    assert (r.status, r.served_by) == (200, "pod0")
    assert r.headers["access-control-allow-origin"] == "https://site.test"
    preflight = ferryman.get(GUARDED, "/app", method="OPTIONS", headers=origin)
    assert preflight.status == 204
    assert preflight.headers["access-control-max-age"] == "60"
    # NIC adds the headers in the Ingress's locations: a 404 has none.
    missing = ferryman.get(GUARDED, "/nowhere", headers=origin)
    assert missing.status == 404
    assert "access-control-allow-origin" not in missing.headers


def test_only_hosts_with_policies_leave_the_module(ferryman: Ferryman, backends: Backends) -> None:
    start(
        ferryman,
        backends,
        policy("open", accessControl={"allow": ["127.0.0.1"]}),
        guarded_ingress("cafe", GUARDED, "open", path("/app", "app", "Exact"), path("/", "app")),
    )
    fast, slow = fast_path_counts(ferryman)
    assert [served_by(ferryman, PLAIN, f"/{i}") for i in range(4)] == ["pod0"] * 4
    # Kubernetes path semantics on the slow path too.
    assert served_by(ferryman, GUARDED, "/app") == "pod0"
    assert served_by(ferryman, GUARDED, "/app/more") == "pod0"
    now_fast, now_slow = fast_path_counts(ferryman)
    assert (now_fast - fast, now_slow - slow) == (4, 2)


@pytest.fixture
def guarded_router(
    either_fast_path: Ferryman, backends: Backends
) -> Iterator[tuple[Ferryman, kit.HostClient]]:
    either_fast_path.write("open", policy("open", accessControl={"allow": ["127.0.0.1"]}))
    yield from router.serve_router(either_fast_path, backends, with_policy)


def with_policy(obj: dict[str, Any]) -> dict[str, Any]:
    obj["metadata"]["annotations"] = {"nginx.org/policies": "open"}
    return obj


@kit.examples(10)
@router.drawn
def test_the_slow_path_routes_a_host_with_policies_like_match(
    guarded_router: tuple[Ferryman, kit.HostClient],
    rules: list[tuple[str, str, str]],
    default: str | None,
    requests: list[str],
) -> None:
    """The Lua slow path matches an Ingress host with policies as
    ``routes.match`` does (the fast path's reference), every request handed over."""
    answers, counts = router.check_example(*guarded_router, rules, default, requests, with_policy)
    if counts is not None:
        assert counts == (0, len(answers))


def test_wildcard_and_catch_all_hosts_with_policies(ferryman: Ferryman, backends: Backends) -> None:
    start(
        ferryman,
        backends,
        policy("local", accessControl={"deny": ["127.0.0.0/8"]}),
        guarded_ingress("wild", "*.wild.test", "local"),
        ingress(
            "any", [rule(None, path("/any", "app"))], annotations={"nginx.org/policies": "local"}
        ),
    )
    assert status(ferryman, "a.wild.test", "/app") == 403
    assert status(ferryman, "unknown.test", "/any") == 403
    assert served_by(ferryman, PLAIN, "/any") == "pod0"  # a named host: its own routes
