"""Which Ingresses ferryman serves: by ingressClassName, legacy annotation, default class."""

from __future__ import annotations

import re
import subprocess
from typing import Any

import pytest

from testkit.gateway_docs import gateway, gateway_class
from testkit.harness import (
    FERRYMAN,
    Backends,
    Ferryman,
    eventually,
    free_port,
    ingress,
    path,
    rule,
    served_by,
    service_with_backends,
)

pytestmark = pytest.mark.flavours("nginx", "nginx-1.30", "angie")


def _ingress_class(default: bool, name: str = "ferryman") -> dict[str, Any]:
    md: dict[str, Any] = {"name": name}
    if default:
        md["annotations"] = {"ingressclass.kubernetes.io/is-default-class": "true"}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "IngressClass",
        "metadata": md,
        "spec": {"controller": "ferryman.io/ingress-controller"},
    }


def _setup(ferryman: Ferryman, backends: Backends) -> None:
    ferryman.write("svc", service_with_backends("app", [backends.start("app")]))
    ferryman.write("mine", ingress("mine", [rule("mine.test", path("/", "app"))]))
    ferryman.write(
        "other", ingress("other", [rule("other.test", path("/", "app"))], class_name="nginx")
    )
    ferryman.write(
        "legacy",
        ingress(
            "legacy",
            [rule("legacy.test", path("/", "app"))],
            class_name=None,
            annotations={"kubernetes.io/ingress.class": "ferryman"},
        ),
    )
    ferryman.write("classless", ingress("classless", [rule("none.test", path("/", "app"))],
                                        class_name=None))  # fmt: skip


def test_only_ingresses_of_our_class_are_served(ferryman: Ferryman, backends: Backends) -> None:
    _setup(ferryman, backends)
    ferryman.start()
    assert served_by(ferryman, "mine.test", "/") == "app"
    assert served_by(ferryman, "legacy.test", "/") == "app"
    assert served_by(ferryman, "other.test", "/") == "404"
    assert served_by(ferryman, "none.test", "/") == "404"
    # Another controller's Ingress is not ours to report on.
    assert ferryman.events_for("other") == []


def test_classless_ingresses_follow_the_default_class(
    ferryman: Ferryman, backends: Backends
) -> None:
    _setup(ferryman, backends)
    ferryman.write("class", _ingress_class(default=True))
    ferryman.start()
    assert served_by(ferryman, "none.test", "/") == "app"
    assert served_by(ferryman, "other.test", "/") == "404"
    ferryman.write("class", _ingress_class(default=False))
    eventually(lambda: served_by(ferryman, "none.test", "/") == "404", 60, "default removed")
    assert served_by(ferryman, "mine.test", "/") == "app"


def test_custom_ingress_class_flag(tmp_path: Any, backends: Backends) -> None:
    f = Ferryman(tmp_path, extra_args=["--ingress-class", "edge"])
    f.write("svc", service_with_backends("app", [backends.start("app")]))
    f.write("edge", ingress("edge", [rule("edge.test", path("/", "app"))], class_name="edge"))
    f.write("mine", ingress("mine", [rule("mine.test", path("/", "app"))]))
    f.start()
    try:
        assert served_by(f, "edge.test", "/") == "app"
        assert served_by(f, "mine.test", "/") == "404"
    finally:
        f.stop()


def test_changing_class_removes_the_ingress(ferryman: Ferryman, backends: Backends) -> None:
    _setup(ferryman, backends)
    ferryman.start()
    ferryman.write("mine", ingress("mine", [rule("mine.test", path("/", "app"))], class_name="x"))
    eventually(lambda: served_by(ferryman, "mine.test", "/") == "404", 60, "class change")


def _vs(name: str, host: str, class_name: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "host": host,
        "upstreams": [{"name": "app", "service": "app", "port": 80}],
        "routes": [{"path": "/", "action": {"pass": "app"}}],
    }
    if class_name is not None:
        spec["ingressClassName"] = class_name
    return {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "VirtualServer",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def _skipped(f: Ferryman, who: str) -> list[str]:
    """The log lines saying ``who`` ("Kind ns/name") was skipped for its class."""
    kind, _, key = who.partition(" ")
    return [
        line
        for line in f.logs().splitlines()
        if f'msg="{kind} skipped:' in line and f"key={key} " in line
    ]


def test_an_ingress_of_another_class_is_said_once_in_the_log(
    tmp_path: Any, backends: Backends
) -> None:
    f = Ferryman(tmp_path)
    _setup(f, backends)
    f.start()
    try:
        assert served_by(f, "other.test", "/") == "404"
        (other,) = _skipped(f, "Ingress default/other")
        assert "level=info" in other
        assert "class=nginx served=ferryman" in other
        assert (
            "class nginx, ferryman serves ferryman; set spec.ingressClassName: ferryman or "
            "run ferryman with --ingress-class=nginx" in other
        )
        (none,) = _skipped(f, "Ingress default/classless")
        assert "no class, ferryman serves ferryman" in none
        assert "set spec.ingressClassName: ferryman" in none
        assert not _skipped(f, "Ingress default/mine")
        # Changed but still another class's: not said again.
        f.write("other", ingress("other", [rule("other2.test", path("/", "app"))],
                                 class_name="nginx"))  # fmt: skip
        f.write("probe", ingress("probe", [rule("probe.test", path("/", "app"))]))
        eventually(lambda: served_by(f, "probe.test", "/") == "app", 60, "probe served")
        assert len(_skipped(f, "Ingress default/other")) == 1
    finally:
        f.stop()


def test_a_virtual_server_of_another_class_is_said_once_then_served_when_its_class_changes(
    tmp_path: Any, backends: Backends
) -> None:
    f = Ferryman(tmp_path)
    _setup(f, backends)
    f.write("vs", _vs("cafe", "cafe.test", "nginx"))
    f.write("tea", _vs("tea", "tea.test", None))  # no class: NIC serves it whatever
    f.start()
    try:
        assert served_by(f, "cafe.test", "/") == "404"
        (said,) = _skipped(f, "VirtualServer default/cafe")
        assert "class nginx, ferryman serves ferryman" in said
        assert not _skipped(f, "VirtualServer default/tea")
        # The start-up line counts every served kind, those of another class apart.
        (ready,) = [line for line in f.logs().splitlines() if "msg=ready " in line]
        assert "msg=ready ingresses=2 " in ready  # mine, legacy
        assert " virtualservers=1 " in ready  # tea
        assert ready.endswith(" other_class=3")  # other, classless, cafe
        # Before it, when the first lists (or manifests) were all in, and how long
        # that took: where a slow start's time went.
        (listed,) = [line for line in f.logs().splitlines() if "msg=listed " in line]
        assert re.search(r" objects=[1-9][0-9]* seconds=[0-9.]+$", listed), listed
        # An unrelated change: the worker runs, nothing is said again.
        f.write("probe", ingress("probe", [rule("probe.test", path("/", "app"))]))
        eventually(lambda: served_by(f, "probe.test", "/") == "app", 60, "probe served")
        f.write("vs", _vs("cafe", "cafe.test", "nginx") | {"metadata": {
            "name": "cafe", "namespace": "default", "labels": {"touched": "yes"}}})  # fmt: skip
        f.write("probe", ingress("probe", [rule("probe2.test", path("/", "app"))]))
        eventually(lambda: served_by(f, "probe2.test", "/") == "app", 60, "probe moved")
        assert len(_skipped(f, "VirtualServer default/cafe")) == 1
        # Its class changed to ferryman's: served.
        f.write("vs", _vs("cafe", "cafe.test", "ferryman"))
        eventually(lambda: served_by(f, "cafe.test", "/") == "app", 60, "cafe served")
        # And back to another class: said again (once), no longer served.
        f.write("vs", _vs("cafe", "cafe.test", "nginx"))
        eventually(lambda: served_by(f, "cafe.test", "/") == "404", 60, "cafe left")
        eventually(lambda: len(_skipped(f, "VirtualServer default/cafe")) == 2, 60, "said again")
    finally:
        f.stop()


def test_routes_and_policies_of_another_class_are_said_once(
    tmp_path: Any, backends: Backends
) -> None:
    f = Ferryman(tmp_path)
    _setup(f, backends)
    f.write("vsr", {"apiVersion": "k8s.nginx.org/v1", "kind": "VirtualServerRoute",
                    "metadata": {"name": "coffee", "namespace": "default"},
                    "spec": {"ingressClassName": "nginx", "host": "cafe.test",
                             "subroutes": []}})  # fmt: skip
    f.write("policy", {"apiVersion": "k8s.nginx.org/v1", "kind": "Policy",
                       "metadata": {"name": "allow", "namespace": "default"},
                       "spec": {"ingressClassName": "nginx",
                                "accessControl": {"allow": ["10.0.0.0/8"]}}})  # fmt: skip
    f.start()
    try:
        assert len(_skipped(f, "VirtualServerRoute default/coffee")) == 1
        assert len(_skipped(f, "Policy default/allow")) == 1
        f.write("probe", ingress("probe", [rule("probe.test", path("/", "app"))]))
        eventually(lambda: served_by(f, "probe.test", "/") == "app", 60, "probe served")
        assert len(_skipped(f, "VirtualServerRoute default/coffee")) == 1
        assert len(_skipped(f, "Policy default/allow")) == 1
    finally:
        f.stop()


def test_render_lists_resources_of_another_class_as_skipped(
    tmp_path: Any, backends: Backends
) -> None:
    f = Ferryman(tmp_path)
    _setup(f, backends)
    f.write("vs", {"apiVersion": "k8s.nginx.org/v1", "kind": "VirtualServer",
                   "metadata": {"name": "cafe", "namespace": "default"},
                   "spec": {"ingressClassName": "nginx", "host": "cafe.test"}})  # fmt: skip
    f.write("ts", {"apiVersion": "k8s.nginx.org/v1", "kind": "TransportServer",
                   "metadata": {"name": "dns", "namespace": "default"},
                   "spec": {"ingressClassName": "nginx"}})  # fmt: skip
    result = subprocess.run(
        [str(FERRYMAN), "render", "--manifests", str(f.manifests), "--output",
         str(tmp_path / "out")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    hint = "set spec.ingressClassName: ferryman or run ferryman with --ingress-class=nginx"
    lines = result.stdout.splitlines()
    # The routes served follow the skipped resources: only our class's hosts.
    hosts = {line.split()[1] for line in lines[5:]}
    assert hosts == {"mine.test", "legacy.test"}, result.stdout
    assert lines[:4] == [
        "skipped: Ingress default/classless: no class, ferryman serves ferryman (IngressClass "
        "ferryman is not the default); set spec.ingressClassName: ferryman",
        f"skipped: Ingress default/other: class nginx, ferryman serves ferryman; {hint}",
        f"skipped: TransportServer default/dns: class nginx, ferryman serves ferryman; {hint}",
        f"skipped: VirtualServer default/cafe: class nginx, ferryman serves ferryman; {hint}",
    ]


@pytest.mark.flavours("nginx")  # Gateway API is the nginx data plane's
def test_a_gateway_of_another_controllers_class_is_said_once(
    ferryman: Ferryman, backends: Backends
) -> None:
    f = ferryman
    f.extra_args += ["--enable-gateway-api"]
    f.write("class", gateway_class())
    istio = {**gateway_class(), "metadata": {"name": "istio"}}
    istio["spec"] = {"controllerName": "istio.io/gateway-controller"}
    f.write("istio", istio)
    listeners = [{"name": "http", "port": free_port(), "protocol": "HTTP"}]
    theirs = gateway("theirs", listeners)
    theirs["spec"]["gatewayClassName"] = "istio"
    f.write("theirs", theirs)
    ghost = gateway("ghost", listeners)
    ghost["spec"]["gatewayClassName"] = "missing"
    f.write("ghost", ghost)
    f.start()
    (said,) = eventually(lambda: _skipped(f, "Gateway default/theirs"), 60, "said")
    assert (
        "GatewayClass istio is istio.io/gateway-controller's; ferryman serves the GatewayClasses"
        in said
    )
    (missing,) = _skipped(f, "Gateway default/ghost")
    assert "GatewayClass missing does not exist" in missing
    # Other changes say nothing again.
    f.write("touch", service_with_backends("app", [backends.start("a")]))
    eventually(lambda: served_by(f, "x.test", "/") == "404", 60, "the change applied")
    assert len(_skipped(f, "Gateway default/theirs")) == 1
