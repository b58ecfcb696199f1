"""VirtualServers on GlobalConfiguration HTTP listeners (spec.listener): NIC's
custom-listeners example applied unchanged, hosts kept to their own listeners,
and reloads only for new ports, through real NGINX (module and Lua fast paths)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from testkit.harness import (
    Backends,
    Ferryman,
    eventually,
    free_port,
    service_with_backends,
    tls_secret,
)
from testkit.listeners import get_on
from testkit.nic_fixtures import NIC_EXAMPLES

GC = "nginx-ingress/nginx-configuration"


def _example(ferryman: Ferryman, folder: str, name: str) -> None:
    ferryman.write_text(
        f"{folder}-{name}".replace("/", "-"), (NIC_EXAMPLES / folder / name).read_text()
    )


def endpoints_only(name: str, backends: Backends, port_name: str = "http") -> list[dict[str, Any]]:
    """The EndpointSlices the cluster makes for cafe.yaml's Service ``name`` (its
    port is named ``port_name``), without the Service, which cafe.yaml has."""
    return service_with_backends(name, [backends.start(name)], port_name=port_name)[1:]


def virtual_server(
    name: str, host: str, listener: dict[str, str] | None, tls: str = ""
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "host": host,
        "upstreams": [{"name": "tea", "service": "tea-svc", "port": 80}],
        "routes": [{"path": "/", "action": {"pass": "tea"}}],
    }
    if listener is not None:
        spec["listener"] = listener
    if tls:
        spec["tls"] = {"secret": tls}
    return {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "VirtualServer",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def global_configuration(listeners: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "GlobalConfiguration",
        "metadata": {"name": "nginx-configuration", "namespace": "nginx-ingress"},
        "spec": {"listeners": listeners},
    }


def test_custom_listeners_example(either_fast_path: Ferryman, backends: Backends) -> None:
    """README: cafe.example.com answers on 8083 (HTTP) and 8443 (HTTPS), the
    listeners of the GlobalConfiguration; it is not served on the default ports,
    and a host without listeners is served there only."""
    ferryman = either_fast_path
    folder = "custom-listeners"
    for name in ("global-configuration.yaml", "cafe.yaml", "cafe-virtual-server.yaml"):
        _example(ferryman, folder, name)
    ferryman.write("tea", endpoints_only("tea-svc", backends))
    ferryman.write("coffee", endpoints_only("coffee-svc", backends))
    ferryman.write("secret", tls_secret("tls-secret", ["cafe.example.com", "plain.example.com"]))
    ferryman.write("plain", virtual_server("plain", "plain.example.com", None, "tls-secret"))
    ferryman.extra_args += ["--global-configuration", GC]
    ferryman.start()
    assert get_on(8083, "cafe.example.com", "/coffee").served_by == "coffee-svc"
    assert get_on(8443, "cafe.example.com", "/coffee", https=True).served_by == "coffee-svc"
    assert get_on(8083, "cafe.example.com", "/tea").served_by == "tea-svc"
    assert get_on(8443, "cafe.example.com", "/tea", https=True).served_by == "tea-svc"
    # Not on the default ports: NIC's server block for it listens on 8083/8443 only.
    assert ferryman.get("cafe.example.com", "/coffee").status == 404
    assert ferryman.get("cafe.example.com", "/coffee", https=True).status == 404
    # Plain HTTP on the https listener's port is not HTTP at all: NGINX says 400.
    assert get_on(8443, "cafe.example.com", "/coffee").status == 400
    # A host without listeners: the default ports only.
    assert ferryman.get("plain.example.com", "/").served_by == "tea-svc"
    assert ferryman.get("plain.example.com", "/", https=True).served_by == "tea-svc"
    assert get_on(8083, "plain.example.com", "/").status == 404
    assert get_on(8443, "plain.example.com", "/", https=True).status == 404
    event = ferryman.events_for("cafe")[-1]
    assert (event["reason"], event["message"]) == (
        "AddedOrUpdated",
        "Configuration for default/cafe was added or updated ",
    )


def test_custom_ip_listeners_example(ferryman: Ferryman, backends: Backends) -> None:
    """README (custom-ip-listeners/virtualserver): the listeners bind only the
    addresses the GlobalConfiguration names, IPv4 and IPv6, and cafe.example.com
    answers there."""
    folder = "custom-ip-listeners/virtualserver"
    for name in ("global-configuration.yaml", "cafe.yaml", "cafe-virtual-server.yaml"):
        _example(ferryman, folder, name)
    ferryman.write("tea", endpoints_only("tea-svc", backends))
    # This cafe.yaml names coffee-svc's port "ip".
    ferryman.write("coffee", endpoints_only("coffee-svc", backends, "ip"))
    ferryman.write("secret", tls_secret("tls-secret", ["cafe.example.com"]))
    ferryman.extra_args += ["--global-configuration", GC]
    ferryman.start()
    host = "cafe.example.com"
    for address in ("127.0.0.1", "::1"):
        assert get_on(8083, host, "/coffee", address=address).served_by == "coffee-svc"
    for address in ("127.0.0.2", "::1"):
        r = get_on(8443, host, "/tea", https=True, address=address)
        assert r.served_by == "tea-svc"
    # Only those addresses: another loopback address is not bound.
    with pytest.raises(httpx.ConnectError):
        get_on(8083, host, "/coffee", address="127.0.0.3")
    with pytest.raises(httpx.ConnectError):
        get_on(8443, host, "/coffee", https=True, address="127.0.0.1")
    event = ferryman.events_for("cafe")[-1]
    assert (event["reason"], event["message"]) == (
        "AddedOrUpdated",
        "Configuration for default/cafe was added or updated ",
    )


def test_listener_changes_reload_only_for_ports(ferryman: Ferryman, backends: Backends) -> None:
    """A new HTTP listener reloads once (a new port); a VirtualServer gaining or
    losing ``listener`` changes its record only: no reload. NIC's warnings for a
    listener that does not fit."""
    port_a, port_b = free_port(), free_port()
    listeners = [{"name": "http-a", "port": port_a, "protocol": "HTTP"}]
    ferryman.write("gc", global_configuration(listeners))
    ferryman.write("tea", service_with_backends("tea-svc", [backends.start("tea")]))
    ferryman.write("vs", virtual_server("cafe", "cafe.example.com", None))
    ferryman.extra_args += ["--global-configuration", GC]
    ferryman.start()
    assert ferryman.get("cafe.example.com", "/").served_by == "tea"
    assert get_on(port_a, "cafe.example.com", "/").status == 404
    before = ferryman.reloads()

    listeners.append({"name": "http-b", "port": port_b, "protocol": "HTTP"})
    ferryman.write("gc", global_configuration(listeners))
    eventually(lambda: get_on(port_b, "cafe.example.com", "/").status == 404, 60, "port b")
    assert ferryman.reloads() == before + 1

    ferryman.write("vs", virtual_server("cafe", "cafe.example.com", {"http": "http-b"}))
    eventually(lambda: get_on(port_b, "cafe.example.com", "/").served_by == "tea", 60, "on b")
    assert ferryman.get("cafe.example.com", "/").status == 404
    assert get_on(port_a, "cafe.example.com", "/").status == 404

    ferryman.write("vs", virtual_server("cafe", "cafe.example.com", {"http": "missing"}))
    eventually(lambda: get_on(port_b, "cafe.example.com", "/").status == 404, 60, "off b")
    assert ferryman.get("cafe.example.com", "/").status == 404
    event = eventually(lambda: ferryman.events_for("cafe")[-1]["reason"] != "AddedOrUpdated")
    event = ferryman.events_for("cafe")[-1]
    assert (event["reason"], event["message"]) == (
        "AddedOrUpdatedWithWarning",
        "Configuration for default/cafe was added or updated with warning(s): "
        "Listener missing is not defined in GlobalConfiguration",
    )

    ferryman.write("vs", virtual_server("cafe", "cafe.example.com", None))
    eventually(lambda: ferryman.get("cafe.example.com", "/").served_by == "tea", 60, "default")
    assert get_on(port_b, "cafe.example.com", "/").status == 404
    assert ferryman.reloads() == before + 1
