"""Which Ingresses ferryman serves: by ingressClassName, legacy annotation, default class."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from testkit.harness import (
    FERRYMAN,
    Backends,
    Ferryman,
    eventually,
    ingress,
    path,
    rule,
    served_by,
    service_with_backends,
)

pytestmark = pytest.mark.flavours("nginx", "angie")


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
    eventually(lambda: served_by(ferryman, "none.test", "/") == "404", 3, "default removed")
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
    eventually(lambda: served_by(ferryman, "mine.test", "/") == "404", 3, "class change")


def test_an_ingress_of_another_class_is_said_once_in_the_log(
    tmp_path: Any, backends: Backends
) -> None:
    f = Ferryman(tmp_path)
    _setup(f, backends)
    f.start()
    try:
        assert served_by(f, "other.test", "/") == "404"
        said = [line for line in f.logs().splitlines() if "Ingress ignored" in line]
        assert len(said) == 2, said  # other (class nginx) and classless
        other = next(line for line in said if "default/other" in line)
        assert "level=info" in other
        assert "its class nginx is not the one served (ferryman)" in other
        assert "serve it with --ingress-class=nginx" in other
        none = next(line for line in said if "default/classless" in line)
        assert "set spec.ingressClassName: ferryman" in none
        # Changed but still another class's: not said again.
        f.write("other", ingress("other", [rule("other2.test", path("/", "app"))],
                                 class_name="nginx"))  # fmt: skip
        f.write("probe", ingress("probe", [rule("probe.test", path("/", "app"))]))
        eventually(lambda: served_by(f, "probe.test", "/") == "app", 5, "probe served")
        assert sum("default/other" in line for line in f.logs().splitlines()
                   if "Ingress ignored" in line) == 1  # fmt: skip
    finally:
        f.stop()


def test_render_lists_ingresses_of_another_class_as_ignored(
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
    assert result.stdout.splitlines() == [
        "Ingress default/classless: ignored: it names no class and IngressClass ferryman is "
        "not the default; set spec.ingressClassName: ferryman",
        "Ingress default/other: ignored: its class nginx is not the one served (ferryman); "
        "serve it with --ingress-class=nginx",
        "TransportServer default/dns: ignored: its class nginx is not the one served "
        "(ferryman); serve it with --ingress-class=nginx",
        "VirtualServer default/cafe: ignored: its class nginx is not the one served "
        "(ferryman); serve it with --ingress-class=nginx",
    ]
