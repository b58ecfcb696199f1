"""NIC's own VirtualServerRoute examples (../shared/vendor/nic-examples-v5.5.4),
applied unchanged, behave as their READMEs say, through real NGINX with no reload.

The applications (Deployments) are ferryman's test backends behind Services of the
examples' names and namespaces. Where a README shows an Event NIC's code no longer
writes, the test follows NIC v5.5.4's code (internal/k8s), named at each place.
"""

from __future__ import annotations

import contextlib

from testkit.harness import (
    Backends,
    Ferryman,
    eventually,
    service_with_backends,
    tls_secret,
)
from testkit.nic_fixtures import NIC_EXAMPLES

HOST = "cafe.example.com"


def _example(f: Ferryman, folder: str, name: str) -> None:
    f.write_text(f"{folder}-{name}", (NIC_EXAMPLES / folder / name).read_text())


def _event(f: Ferryman, kind: str, namespace: str, name: str) -> tuple[str, str, str]:
    e = [e for e in f.events_for(name) if (e.get("kind"), e.get("namespace")) == (kind, namespace)][
        -1
    ]
    return e["type"], e["reason"], e["message"]


def _event_is(
    f: Ferryman, kind: str, namespace: str, name: str, expected: tuple[str, str, str]
) -> None:
    """Waits for the resource's latest Event to be ``expected``: Events are written
    after the records reach NGINX, so a change seen served may not be reported yet."""
    with contextlib.suppress(AssertionError):  # the assertion below shows what came instead
        eventually(lambda: _event(f, kind, namespace, name) == expected, 30, f"{name}'s Event")
    assert _event(f, kind, namespace, name) == expected


def _vsr_added(f: Ferryman, namespace: str, name: str) -> None:
    _event_is(
        f,
        "VirtualServerRoute",
        namespace,
        name,
        ("Normal", "AddedOrUpdated", f"Configuration for {namespace}/{name} was added or updated"),
    )


def _cafe(f: Ferryman, backends: Backends, namespaces: dict[str, str]) -> None:
    """tea-svc and coffee-svc, each in its namespace; the TLS Secret in the VS's."""
    for app, ns in namespaces.items():
        f.write(app, service_with_backends(f"{app}-svc", [backends.start(app)], namespace=ns))


def _served(f: Ferryman, path: str) -> str | None:
    return f.get(HOST, path, https=True).served_by


def test_basic_configuration_vsr(ferryman: Ferryman, backends: Backends) -> None:
    """README: /tea (a VSR by namespace/name) and /coffee (a VSR picked by the
    routeSelector of "/") reach the tea and coffee pods; each resource's Event is
    AddedOrUpdated."""
    f = ferryman
    _cafe(f, backends, {"tea": "default", "coffee": "default"})
    f.write("secret", tls_secret("tls-secret", [HOST]))
    for name in ("cafe-virtual-server", "tea-virtual-server-route", "coffee-virtual-server-route"):
        _example(f, "basic-configuration-vsr", f"{name}.yaml")
    f.start()
    assert _served(f, "/tea") == "tea"
    assert _served(f, "/coffee") == "coffee"
    for name in ("tea", "coffee"):
        _vsr_added(f, "default", name)
    _event_is(
        f,
        "VirtualServer",
        "default",
        "cafe",
        (
            "Normal",
            "AddedOrUpdated",
            "Configuration for default/cafe was added or updated ",  # NIC's trailing space
        ),
    )
    assert f.reloads() == 1


def _cross_namespace(f: Ferryman, backends: Backends, folder: str) -> None:
    _example(f, folder, "namespaces.yaml")
    _cafe(f, backends, {"tea": "tea", "coffee": "coffee"})
    f.write("secret", tls_secret("cafe-secret", [HOST], namespace="cafe"))
    # The README's order: the VirtualServerRoutes first, then the VirtualServer.
    _example(f, folder, "tea-virtual-server-route.yaml")
    _example(f, folder, "coffee-virtual-server-route.yaml")
    f.start()
    for ns in ("tea", "coffee"):
        # The README shows NIC 1.x's "NoVirtualServersFound"; v5.5.4 says this.
        _event_is(
            f,
            "VirtualServerRoute",
            ns,
            ns,
            (
                "Warning",
                "NoVirtualServerFound",
                "VirtualServer is invalid or doesn't exist",
            ),
        )
    _example(f, folder, "cafe-virtual-server.yaml")
    eventually(lambda: _served(f, "/coffee") == "coffee", 60, "coffee")
    assert _served(f, "/tea") == "tea"
    for ns in ("tea", "coffee"):
        _vsr_added(f, ns, ns)
    _event_is(
        f,
        "VirtualServer",
        "cafe",
        "cafe",
        (
            "Normal",
            "AddedOrUpdated",
            "Configuration for cafe/cafe was added or updated ",
        ),
    )
    assert f.reloads() == 1


def test_cross_namespace_configuration(ferryman: Ferryman, backends: Backends) -> None:
    """README: the VS in cafe names tea/tea and coffee/coffee; before it exists
    the VirtualServerRoutes have no VirtualServer, then /tea and /coffee work."""
    _cross_namespace(ferryman, backends, "cross-namespace-configuration")


def test_vsr_route_selector_crossnamespace(ferryman: Ferryman, backends: Backends) -> None:
    """README: the VS's "/" selects app=cafe VirtualServerRoutes in the tea and
    coffee namespaces; /tea and /coffee reach their pods."""
    _cross_namespace(ferryman, backends, "vsr-route-selector-crossnamespace")


def test_vsr_multiple_regex_routes(ferryman: Ferryman) -> None:
    """README: one VSR per group of regex routes (with a space after the modifier
    in one subroute); the three error cases reject vsr-api only, the VS turns
    Warning, vsr-media and /health keep serving."""
    f = ferryman
    folder = "vsr-multiple-regex-routes"
    for name in ("vsr-api", "vsr-media", "virtual-server"):
        _example(f, folder, f"{name}.yaml")
    f.start()

    def get(path: str) -> tuple[int, str]:
        r = f.get("api-gateway.example.com", path)
        return r.status, r.text

    assert get("/health") == (200, "OK\n")
    assert get("/api/v1") == (
        200,
        "API v1\nVSR: vsr-api\nPath directive: ~/api/v1\nRequest URI: /api/v1\n",
    )
    assert get("/api/v2") == (
        200,
        "API v2\nVSR: vsr-api\nPath directive: ~/api/v2\nRequest URI: /api/v2\n",
    )
    for kind, path in (("JPEG", "jpg"), ("PNG", "png")):
        assert get(f"/images/{path}") == (
            200,
            f"{kind} image\nVSR: vsr-media\nPath directive: ~*/images/{path}\n"
            f"Request URI: /images/{path}\n",
        )
    assert get("/IMAGES/PNG")[0] == 200  # ~*: case-insensitive
    for name in ("vsr-api", "vsr-media"):
        _vsr_added(f, "default", name)
    eventually(
        lambda: _event(f, "VirtualServer", "default", "api-gateway")[1] == "AddedOrUpdated",
        30,
        "api-gateway AddedOrUpdated",
    )

    warning = "Configuration for default/api-gateway was added or updated with warning(s): "
    cases = {
        "vsr-api-missing-subroute.yaml": "VirtualServerRoute default/vsr-api is invalid: "
        "spec.subroutes: Invalid value: \"subroutes\": subroute with path '~/api/v2' is "
        "missing; all VS route paths must be covered by VSR subroutes",
        "vsr-api-extra-subroute.yaml": "VirtualServerRoute default/vsr-api is invalid: "
        "spec.subroutes[2].path: Invalid value: \"~/api/v3\": subroute path '~/api/v3' is "
        "not referenced by any VS route; all VSR subroutes must be referenced",
        # Once per route naming it, as NIC's collectRegexNamedRoute says it.
        "vsr-api-duplicate-paths.yaml": "; ".join(
            ["VirtualServerRoute default/vsr-api doesn't exist or invalid"] * 2
        ),
    }
    for case, vs_warning in cases.items():
        f.write_text(f"{folder}-vsr-api.yaml", (NIC_EXAMPLES / folder / case).read_text())
        eventually(lambda: get("/api/v1")[0] == 404, 60, case)
        _event_is(
            f,
            "VirtualServer",
            "default",
            "api-gateway",
            (
                "Warning",
                "AddedOrUpdatedWithWarning",
                warning + vs_warning,
            ),
        )
        duplicate = case == "vsr-api-duplicate-paths.yaml"
        expected_reason = "Rejected" if duplicate else "Ignored"
        eventually(
            lambda want=expected_reason: (
                _event(f, "VirtualServerRoute", "default", "vsr-api")[1] == want
            ),
            30,
            f"vsr-api {expected_reason}",
        )
        type_, reason, message = _event(f, "VirtualServerRoute", "default", "vsr-api")
        if duplicate:
            assert (type_, reason) == ("Warning", "Rejected")
            assert message.startswith(
                "VirtualServerRoute default/vsr-api was rejected with error: "
                'spec.subroutes[1].path: Duplicate value: "~ /api/v1"'
            )
        else:
            # The README shows "Rejected" with the VS's warning; NIC's code
            # (addProblemsForOrphanOrIgnoredVsrs) reports a valid VSR its VS
            # does not serve as Ignored.
            assert (type_, reason, message) == (
                "Warning",
                "Ignored",
                "VirtualServer default/api-gateway ignores VirtualServerRoute",
            )
        assert get("/health") == (200, "OK\n")
        assert get("/images/jpg")[0] == 200
        # Restored, as the README says to.
        _example(f, folder, "vsr-api.yaml")
        eventually(lambda: get("/api/v2")[0] == 200, 60, f"restored after {case}")
    assert f.reloads() == 1
