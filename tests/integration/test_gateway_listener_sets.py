"""Gateway API ListenerSets through real NGINX and real backends (manifests
mode): a ListenerSet's listener is served on its Gateway's address only when
the Gateway admits it, routes attach to it by a ListenerSet parentRef, and
route changes there reload nothing."""

from __future__ import annotations

from typing import Any

import pytest

from testkit.gateway_docs import gateway, gateway_class, route, served, to
from testkit.harness import Backends, Ferryman, eventually, free_port, service_with_backends

POOL = ("127.0.0.13", "127.0.0.14")


def listener_set(name: str, gateway_name: str, listeners: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "ListenerSet",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"parentRef": {"name": gateway_name}, "listeners": listeners},
    }


def on_set(name: str, listener_set_name: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    doc = route(name, "", [], rules)
    doc["spec"]["parentRefs"] = [{"kind": "ListenerSet", "name": listener_set_name}]
    return doc


@pytest.fixture
def gw(ferryman: Ferryman, backends: Backends) -> Ferryman:
    for name in ("tea", "coffee"):
        ferryman.write(name, service_with_backends(name, [backends.start(name)]))
    ferryman.write("class", gateway_class())
    ferryman.extra_args += ["--enable-gateway-api", "--gateway-addresses", "-".join(POOL)]
    return ferryman


@pytest.mark.flavours("nginx", "nginx-1.30", "angie")
def test_a_listener_sets_listener_serves_its_routes_without_reloads(gw: Ferryman) -> None:
    port = free_port()
    own = {"name": "own", "port": port, "protocol": "HTTP", "hostname": "own.example.com"}
    extra = {"name": "extra", "port": port, "protocol": "HTTP", "hostname": "extra.example.com"}
    admits = {"allowedListeners": {"namespaces": {"from": "Same"}}}
    gw.write("gateways", gateway("one", [own], **admits))
    gw.write("sets", listener_set("extras", "one", [extra]))
    gw.write("routes", on_set("r1", "extras", [to("tea")]))
    gw.start()
    address = POOL[0]
    assert served(address, port, "extra.example.com") == "tea"
    # The route's parent is the ListenerSet: the Gateway's own listener has no route.
    assert served(address, port, "own.example.com") == "404"
    reloads = gw.reloads()
    gw.write("routes", on_set("r1", "extras", [to("coffee")]))
    eventually(lambda: served(address, port, "extra.example.com") == "coffee", what="edit")
    gw.write("routes", on_set("r1", "extras", [to("coffee")]), on_set("r2", "extras",
             [to("tea", "/tea")]))  # fmt: skip
    eventually(lambda: served(address, port, "extra.example.com", "/tea") == "tea", what="add")
    assert gw.reloads() == reloads


def test_a_gateway_admits_no_listener_set_by_default(gw: Ferryman) -> None:
    port = free_port()
    own = {"name": "own", "port": port, "protocol": "HTTP", "hostname": "own.example.com"}
    extra = {"name": "extra", "port": port, "protocol": "HTTP", "hostname": "extra.example.com"}
    gw.write("gateways", gateway("one", [own]))
    gw.write("sets", listener_set("extras", "one", [extra]))
    gw.write("routes", on_set("r1", "extras", [to("tea")]), route("r2", "one", [], [to("coffee")]))
    gw.start()
    address = POOL[0]
    assert served(address, port, "own.example.com") == "coffee"
    assert served(address, port, "extra.example.com") == "404"
    # Admitted: the ListenerSet's listener is served, the Gateway's keeps its routes.
    gw.write("gateways", gateway("one", [own], allowedListeners={"namespaces": {"from": "All"}}))
    eventually(lambda: served(address, port, "extra.example.com") == "tea", what="admitted")
    assert served(address, port, "own.example.com") == "coffee"
