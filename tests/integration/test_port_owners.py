"""Who owns a port, through real NGINX: ferryman's own ports are refused to
Ingresses, a port another process holds is refused to the resource that
asked for it (found from NGINX's failed reload) while every later change
still reloads, and one port has one owner across Ingress listen ports,
Gateway listeners and GlobalConfiguration listeners: the oldest."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from testkit.configmap_docs import NAME as CM_NAME
from testkit.configmap_docs import NS as CM_NS
from testkit.configmap_docs import configmap
from testkit.gateway_docs import gateway, gateway_class, route, served, to
from testkit.harness import (
    Backends,
    Ferryman,
    eventually,
    free_port,
    ingress,
    path,
    rule,
    service_with_backends,
)
from testkit.listeners import get_on


def _ing(name: str, host: str, ports: str, created: str | None = None) -> dict[str, Any]:
    return ingress(
        name,
        [rule(host, path("/", "app"))],
        annotations={"nginx.org/listen-ports": ports},
        created=created,
    )


def _json_lines(f: Ferryman, msg: str) -> list[dict[str, Any]]:
    out = []
    for line in f.logs().splitlines():
        if line.startswith("{"):
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if rec.get("msg") == msg:
                out.append(rec)
    return out


def _last(f: Ferryman, name: str) -> dict[str, str]:
    events = f.events_for(name) or [e for e in _json_lines(f, "event") if e["name"] == name]
    assert events, f"no Event for {name}"
    return events[-1]


def _reason(f: Ferryman, name: str) -> str | None:
    """The reason of ``name``'s last Event, None before it has one."""
    events = f.events_for(name) or [e for e in _json_lines(f, "event") if e["name"] == name]
    return events[-1]["reason"] if events else None


@contextmanager
def _held(port: int) -> Iterator[None]:
    """``port`` bound and listening by this process, as another program would."""
    with socket.socket() as s:
        s.bind(("0.0.0.0", port))
        s.listen()
        yield


def test_ferrymans_own_ports_are_refused(ferryman: Ferryman, backends: Backends) -> None:
    """The readiness gate webhook's port is ferryman's as the probes' are: an
    Ingress asking for it is told, and its other port serves."""
    f = ferryman
    webhook, ok = free_port(), free_port()
    f.extra_args += [
        "--readiness-gate-webhook-port", str(webhook),
        "--readiness-gate-webhook-cert-secret", "default/webhook-cert",
    ]  # fmt: skip
    f.write("svc", service_with_backends("app", [backends.start("a")]))
    f.write("ing", _ing("ing", "a.test", f"{ok},{webhook},{f.metrics_port}"))
    f.start()
    assert get_on(ok, "a.test", "/").served_by == "a"
    # The Event follows the push that serves: ready is no promise it is written.
    eventually(lambda: _reason(f, "ing"), 60, "ing's Event")
    event = _last(f, "ing")
    assert event["reason"] == "AddedOrUpdatedWithWarning"
    assert (
        f"nginx.org/listen-ports: port {webhook} is ferryman's --readiness-gate-webhook-port"
        in event["message"]
    )
    assert f"port {f.metrics_port} is ferryman's --metrics-port" in event["message"]


def test_a_port_in_use_is_refused_and_later_changes_apply(
    ferryman: Ferryman, backends: Backends
) -> None:
    """NGINX cannot bind a port another process holds: the reload fails once,
    the port is refused to the Ingress that asked for it (the reason named),
    and the reload goes on without it; later changes (another Ingress's free
    port, the ConfigMap) still reload."""
    f = ferryman
    busy, ok, later = free_port(), free_port(), free_port()
    f.extra_args += ["--nginx-configmaps", f"{CM_NS}/{CM_NAME}"]
    f.write("cm", configmap(server_tokens="true"))
    f.write("svc", service_with_backends("app", [backends.start("a")]))
    f.write("free", _ing("free", "free.test", str(ok)))
    with _held(busy):
        f.write("busy", _ing("busy", "busy.test", str(busy)))
        f.start()
        assert get_on(ok, "free.test", "/").served_by == "a"
        eventually(
            lambda: _last(f, "busy")["reason"] == "AddedOrUpdatedWithWarning", 60, "busy told"
        )
        assert (
            f"nginx.org/listen-ports: port {busy} cannot be bound: Address already in use; "
            "the host is not served on it"
        ) in _last(f, "busy")["message"]

        # Another Ingress's free port: applied.
        f.write("later", _ing("later", "later.test", str(later)))
        eventually(lambda: get_on(later, "later.test", "/").served_by == "a", 60, "later")
        # The Event follows the push that served it: on a busy machine, a moment later.
        eventually(lambda: _reason(f, "later") == "AddedOrUpdated", 60, "later's Event")

        # The ConfigMap, in one reload with a second busy port: told that its
        # reload failed, then applied once the port is dropped, and said so.
        busy2 = free_port()
        waiting = f"ConfigMap {CM_NS}/{CM_NAME} was updated, but not applied yet: "
        told = eventually(
            lambda: [r for r, m in _cm_events(f) if m.startswith(waiting)], 60, "start-up's"
        )
        assert told == ["UpdatedWithError"]  # the start-up reload failed too
        with _held(busy2):
            f.write("cm", configmap(server_tokens="false"), _ing("busy2", "b2.test", str(busy2)))
            eventually(
                lambda: "nginx/" not in get_on(ok, "free.test", "/").headers.get("server", ""),
                60,
                "server_tokens off",
            )
            eventually(lambda: _cm_events(f)[-1][0] == "Updated", 60, "ConfigMap Updated")
        assert [r for r, m in _cm_events(f) if m.startswith(waiting)] == told * 2
        # Written with the ConfigMap's, in no particular order among them.
        eventually(
            lambda: f"port {busy2} cannot be bound" in _last(f, "busy2")["message"], 60, "busy2"
        )
    assert f.metrics()["nginx_ingress_controller_nginx_reload_errors_total"] == 2


def _cm_events(f: Ferryman) -> list[tuple[str, str]]:
    return [(e["reason"], e["message"]) for e in f.events() if e.get("name") == CM_NAME]


def _statuses(f: Ferryman, kind: str, name: str) -> list[dict[str, Any]]:
    return [r["status"] for r in _json_lines(f, "status") if (r["kind"], r["name"]) == (kind, name)]


def _listener_condition(f: Ferryman, gateway_name: str, listener: str) -> dict[str, Any] | None:
    statuses = _statuses(f, "Gateway", gateway_name)
    if not statuses:
        return None
    for lst in statuses[-1].get("listeners", []):
        if lst["name"] == listener:
            for c in lst["conditions"]:
                if c["type"] == "Accepted":
                    return dict(c)
    return None


def _gateway_setup(f: Ferryman, backends: Backends) -> None:
    f.write("tea", service_with_backends("tea", [backends.start("tea")]))
    f.write("svc", service_with_backends("app", [backends.start("a")]))
    f.write("class", gateway_class())
    f.extra_args += ["--enable-gateway-api", "--log-format", "json"]


def _gw(name: str, port: int, created: str) -> dict[str, Any]:
    g = gateway(name, [{"name": "http", "port": port, "protocol": "HTTP"}])
    g["metadata"]["creationTimestamp"] = created
    return g


def test_an_older_gateway_listener_keeps_its_port_from_an_ingress(
    ferryman: Ferryman, backends: Backends
) -> None:
    f = ferryman
    port = free_port()
    _gateway_setup(f, backends)
    f.write("gw", _gw("gw", port, "2020-01-01T00:00:00Z"), route("r", "gw", [], [to("tea")]))
    f.write("ing", _ing("ing", "ing.test", str(port), created="2021-01-01T00:00:00Z"))
    f.start()
    eventually(lambda: served("127.0.0.1", port, "ing.test") == "tea", 60, "gateway serves")
    # The Event and the status follow the push that serves, on a busy machine a moment later.
    eventually(lambda: _reason(f, "ing"), 60, "ing's Event")
    event = _last(f, "ing")
    assert event["reason"] == "AddedOrUpdatedWithWarning"
    assert (
        f"nginx.org/listen-ports: port {port} is Gateway default/gw's listener http's port"
        in event["message"]
    )
    condition = eventually(lambda: _listener_condition(f, "gw", "http"), 60, "gateway status")
    assert condition["status"] == "True"


def test_an_older_ingress_keeps_its_port_from_a_gateway_listener(
    ferryman: Ferryman, backends: Backends
) -> None:
    f = ferryman
    port = free_port()
    _gateway_setup(f, backends)
    f.write("ing", _ing("ing", "ing.test", str(port), created="2020-01-01T00:00:00Z"))
    f.write("gw", _gw("gw", port, "2021-01-01T00:00:00Z"), route("r", "gw", [], [to("tea")]))
    f.start()
    eventually(lambda: get_on(port, "ing.test", "/").served_by == "a", 60, "ingress serves")
    assert eventually(lambda: _reason(f, "ing"), 60, "ing's Event") == "AddedOrUpdated"
    condition = eventually(lambda: _listener_condition(f, "gw", "http"), 60, "gateway status")
    assert (condition["status"], condition["reason"]) == ("False", "PortUnavailable")
    assert "Ingress default/ing" in condition["message"]

    # The Ingress goes: the Gateway listener takes the port.
    f.remove("ing")
    eventually(lambda: served("127.0.0.1", port, "x.test") == "tea", 60, "gateway serves")
    # The status follows the push by a moment on a busy machine.
    eventually(
        lambda: (_listener_condition(f, "gw", "http") or {}).get("status") == "True",
        60,
        "listener accepted",
    )


def _global_configuration(port: int, created: str) -> dict[str, Any]:
    return {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "GlobalConfiguration",
        "metadata": {"name": "gc", "namespace": "default", "creationTimestamp": created},
        "spec": {"listeners": [{"name": "tcp-one", "port": port, "protocol": "TCP"}]},
    }


def test_a_global_configuration_listener_against_a_gateway_listener(
    ferryman: Ferryman, backends: Backends
) -> None:
    """The older GlobalConfiguration keeps its listener's port: the younger
    Gateway's listener is told, and every later change still reloads."""
    f = ferryman
    port, later = free_port(), free_port()
    _gateway_setup(f, backends)
    f.extra_args += ["--global-configuration", "default/gc"]
    f.write("gc", _global_configuration(port, "2020-01-01T00:00:00Z"))
    f.write("gw", _gw("gw", port, "2021-01-01T00:00:00Z"), route("r", "gw", [], [to("tea")]))
    f.start()
    condition = eventually(lambda: _listener_condition(f, "gw", "http"), 60, "gateway status")
    assert (condition["status"], condition["reason"]) == ("False", "PortUnavailable")
    assert "GlobalConfiguration listener tcp-one" in condition["message"]
    f.write("later", _ing("later", "later.test", str(later)))
    eventually(lambda: get_on(later, "later.test", "/").served_by == "a", 60, "later")
    assert f.metrics()["nginx_ingress_controller_nginx_reload_errors_total"] == 0


def test_an_older_gateway_listener_keeps_its_port_from_a_global_configuration(
    ferryman: Ferryman, backends: Backends
) -> None:
    """The younger GlobalConfiguration's listener on the port is left out and
    reported as its other problems are; the Gateway serves there."""
    f = ferryman
    port = free_port()
    _gateway_setup(f, backends)
    f.extra_args += ["--global-configuration", "default/gc"]
    f.write("gw", _gw("gw", port, "2020-01-01T00:00:00Z"), route("r", "gw", [], [to("tea")]))
    f.write("gc", _global_configuration(port, "2021-01-01T00:00:00Z"))
    f.start()
    eventually(lambda: served("127.0.0.1", port, "x.test") == "tea", 60, "gateway serves")
    condition = eventually(lambda: _listener_condition(f, "gw", "http"), 60, "gateway status")
    assert condition["status"] == "True"
    event = eventually(
        lambda: [e for e in _json_lines(f, "event") if e["kind"] == "GlobalConfiguration"], 60, "gc"
    )[-1]
    assert event["reason"] == "AddedOrUpdatedWithError"
    assert (
        f"Listener tcp-one: port {port} is Gateway default/gw's listener http's port"
        in event["message"]
    )
    assert f.metrics()["nginx_ingress_controller_nginx_reload_errors_total"] == 0


def test_a_global_configuration_listener_on_a_port_in_use_is_left_out(
    ferryman: Ferryman, backends: Backends
) -> None:
    """Its listener is left out and reported as the object's other problems
    are; ferryman becomes ready and later changes still reload."""
    f = ferryman
    busy, later = free_port(), free_port()
    f.write("svc", service_with_backends("app", [backends.start("a")]))
    f.extra_args += ["--global-configuration", "default/gc", "--log-format", "json"]
    with _held(busy):
        f.write("gc", _global_configuration(busy, "2020-01-01T00:00:00Z"))
        f.start()
        event = eventually(
            lambda: [e for e in _json_lines(f, "event") if e["kind"] == "GlobalConfiguration"],
            60,
            "gc",
        )[-1]
        assert event["reason"] == "AddedOrUpdatedWithError"
        assert (
            f"Listener tcp-one: port {busy} cannot be bound: Address already in use"
            in event["message"]
        )
        f.write("later", _ing("later", "later.test", str(later)))
        eventually(lambda: get_on(later, "later.test", "/").served_by == "a", 60, "later")
    assert f.metrics()["nginx_ingress_controller_nginx_reload_errors_total"] == 1


def test_a_gateway_listener_on_a_port_in_use_is_told_and_the_rest_serves(
    ferryman: Ferryman, backends: Backends
) -> None:
    f = ferryman
    busy, ok = free_port(), free_port()
    _gateway_setup(f, backends)
    listeners = [
        {"name": "busy", "port": busy, "protocol": "HTTP"},
        {"name": "ok", "port": ok, "protocol": "HTTP"},
    ]
    with _held(busy):
        f.write("gw", gateway("gw", listeners), route("r", "gw", [], [to("tea")]))
        f.start()
        eventually(lambda: served("127.0.0.1", ok, "x.test") == "tea", 60, "the free listener")

        def told() -> dict[str, Any] | None:
            c = _listener_condition(f, "gw", "busy")
            return c if c is not None and c["status"] == "False" else None

        condition = eventually(told, 60, "PortUnavailable")
        assert condition["reason"] == "PortUnavailable"
        assert condition["message"] == f"port {busy} cannot be bound: Address already in use"
    assert f.metrics()["nginx_ingress_controller_nginx_reload_errors_total"] == 1


def test_an_older_global_configuration_takes_a_port_back_with_a_new_listener(
    ferryman: Ferryman, backends: Backends
) -> None:
    """Age decides, not who asked first: a listener added to an older
    GlobalConfiguration takes the port from a younger Gateway's listener."""
    f = ferryman
    port, other = free_port(), free_port()
    _gateway_setup(f, backends)
    f.extra_args += ["--global-configuration", "default/gc"]
    f.write("gc", _global_configuration(other, "2020-01-01T00:00:00Z"))
    f.write("gw", _gw("gw", port, "2021-01-01T00:00:00Z"), route("r", "gw", [], [to("tea")]))
    f.start()
    eventually(lambda: served("127.0.0.1", port, "x.test") == "tea", 60, "gateway serves")
    gc = _global_configuration(other, "2020-01-01T00:00:00Z")
    gc["spec"]["listeners"].append({"name": "tcp-two", "port": port, "protocol": "TCP"})
    f.write("gc", gc)

    def told() -> dict[str, Any] | None:
        c = _listener_condition(f, "gw", "http")
        return c if c is not None and c["status"] == "False" else None

    condition = eventually(told, 60, "PortUnavailable")
    assert condition["message"] == f"port {port} is GlobalConfiguration listener tcp-two's port"
    # The GlobalConfiguration's Event: written after its first (at start) one.
    gc_events = eventually(
        lambda: [e for e in _json_lines(f, "event") if e["kind"] == "GlobalConfiguration"][1:],
        60,
        "the GlobalConfiguration's second Event",
    )
    assert gc_events[-1]["reason"] == "Updated"
    assert f.metrics()["nginx_ingress_controller_nginx_reload_errors_total"] == 0
