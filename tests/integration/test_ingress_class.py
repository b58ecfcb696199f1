"""Which Ingresses ferryman serves: by ingressClassName, legacy annotation, default class."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.harness import (
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
