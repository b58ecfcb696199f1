"""NIC's grpc-upstreams example, applied unchanged: served over HTTP/1.1 with
a Warning naming ``type``, as docs/virtualserver.md says (gRPC needs HTTP/2
listeners, which ferryman does not open)."""

from __future__ import annotations

from tests.integration.harness import Backends, Ferryman, service_with_backends, tls_secret
from tests.unit.nic_fixtures import NIC_EXAMPLES


def test_grpc_upstreams(ferryman: Ferryman, backends: Backends) -> None:
    f = ferryman
    f.write("grpc", service_with_backends("grpc-svc", [backends.start("grpc")], port=50051))
    f.write("tls", tls_secret("tls-secret", ["greeter.example.com"]))
    name = "grpc-upstreams/greeter-virtual-server.yaml"
    f.write_text("grpc-upstreams-greeter.yaml", (NIC_EXAMPLES / name).read_text())
    f.start()
    e = [e for e in f.events_for("cafe") if e.get("kind") == "VirtualServer"][-1]
    assert (e["type"], e["reason"]) == ("Warning", "AddedOrUpdatedWithWarning")
    assert "spec.upstreams[0].type: gRPC needs HTTP/2 listeners" in e["message"]
    r = f.get("greeter.example.com", "/helloworld.Greeter/SayHello", https=True)
    assert r.served_by == "grpc"
