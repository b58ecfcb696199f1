"""NIC's use-cluster-ip, checked the same way for the Ingress annotation and the
VirtualServer upstream field: a Service whose ClusterIP and endpoints are
different backends, so an answer says which one the route used."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from testkit.harness import Backends, Ferryman, eventually, free_port, service_with_backends

# (name, host, port, use-cluster-ip) -> the resource routing host to Service "app".
Resource = Callable[[str, str, int, bool], dict[str, Any]]


def assert_use_cluster_ip(f: Ferryman, backends: Backends, resource: Resource) -> None:
    """The route asking for it answers from the ClusterIP, one beside it from the
    endpoints; turning it off and on and a new ClusterIP (the Service changed)
    are endpoint-set changes: no reload after the start-up one."""
    port = free_port()
    backends.start("cluster-ip", address="127.0.0.77", port=port)
    docs = service_with_backends("app", [backends.start("endpoint")], port=port)
    docs[0]["spec"]["clusterIP"] = "127.0.0.77"
    f.write("svc", docs)
    f.write("cip", resource("cip", "cip.test", port, True))
    f.write("ep", resource("ep", "ep.test", port, False))
    f.start()
    assert f.get("cip.test", "/").served_by == "cluster-ip"
    assert f.get("ep.test", "/").served_by == "endpoint"
    assert f.events_for("cip")[-1]["reason"] == "AddedOrUpdated"
    f.write("cip", resource("cip", "cip.test", port, False))
    eventually(lambda: f.get("cip.test", "/").served_by == "endpoint", 60, "endpoints")
    f.write("cip", resource("cip", "cip.test", port, True))
    eventually(lambda: f.get("cip.test", "/").served_by == "cluster-ip", 60, "cluster ip")
    backends.start("moved", address="127.0.0.78", port=port)
    docs[0]["spec"]["clusterIP"] = "127.0.0.78"
    f.write("svc", docs)
    eventually(lambda: f.get("cip.test", "/").served_by == "moved", 60, "moved cluster ip")
    assert f.reloads() == 1
