"""A kind registered from outside the engine is served end to end: the tests'
own ``StaticRoute`` (testkit/plugin_kind.py) is one ``KindSpec``, a parser and
a translator handed to ``cli.main``; the manifests source accepts it, the
store keeps it, the worker routes its host through real NGINX, and it claims
its host against Ingresses by age, as every kind does."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from testkit.harness import (
    ROOT,
    Backends,
    Ferryman,
    eventually,
    ingress,
    path,
    rule,
    served_by,
    service_with_backends,
)


def _static_route(name: str, host: str, service: str, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "example.ferryman.test/v1",
        "kind": "StaticRoute",
        "metadata": {"name": name, "namespace": "default", **meta},
        "spec": {"host": host, "service": service, "port": 80},
    }


def _with_plugin(tmp_path: Path) -> Ferryman:
    return Ferryman(
        tmp_path,
        command_prefix=[sys.executable, "-m", "testkit.plugin_kind"],
        env={"PYTHONPATH": str(ROOT)},
    )


def test_a_registered_kind_is_served_through_nginx(tmp_path: Path, backends: Backends) -> None:
    f = _with_plugin(tmp_path)
    f.write("svc", service_with_backends("static", [backends.start("static")]))
    f.write("route", _static_route("home", "static.example.com", "static"))
    f.start()
    try:
        assert served_by(f, "static.example.com", "/any/path") == "static"
        events = f.events_for("home")
        assert events and events[-1]["reason"] == "AddedOrUpdated", events

        # Invalid input is rejected with its reason; what serves goes on serving.
        f.write("bad", _static_route("bad", "bad host!", "static"))
        eventually(lambda: f.events_for("bad"), what="the rejection")
        assert f.events_for("bad")[-1]["reason"] == "Rejected"
        assert "spec.host" in f.events_for("bad")[-1]["message"]
        assert served_by(f, "static.example.com", "/") == "static"

        # Host ownership across kinds: the older claimant keeps the host.
        f.write("svc-ing", service_with_backends("ing", [backends.start("ing")]))
        f.write(
            "ing",
            ingress(
                "younger",
                [rule("static.example.com", path("/", "ing"))],
                created="2026-01-02T00:00:00Z",
            ),
        )
        f.write(
            "route",
            _static_route(
                "home", "static.example.com", "static", creationTimestamp="2026-01-01T00:00:00Z"
            ),
        )
        eventually(lambda: f.events_for("younger"), what="the Ingress's Event")
        assert served_by(f, "static.example.com", "/") == "static"

        # Deleted, the host passes to the Ingress.
        f.remove("route")
        eventually(
            lambda: served_by(f, "static.example.com", "/") == "ing", what="the Ingress serving"
        )
    finally:
        f.stop()
