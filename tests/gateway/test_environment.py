"""The conformance suite's environment, before ferryman is involved: its base
manifests on the test cluster become Ready pods running echo-basic, each in a
network namespace of its own, EndpointSlices follow them, and they answer as
the suite expects (the echo JSON, X-Echo-Set-Header, TLS from a secret volume).
A failure here would otherwise look like a ferryman failure in the suite."""

from __future__ import annotations

import json
import socket
import ssl
import urllib.request

from lightkube.resources.discovery_v1 import EndpointSlice

from testkit.apiserver import APIServer, wait_until
from testkit.gateway_environment import Conformance, start_base_pods
from testkit.kubelet import Kubelet


def test_the_base_manifests_become_ready_pods_answering_as_echo_basic(
    gateway_cluster: APIServer, gateway_kubelet: Kubelet, conformance: Conformance
) -> None:
    kube = gateway_cluster.client()
    pods = start_base_pods(kube, conformance, gateway_kubelet)
    assert len(pods) == 23, "the suite's release has 23 base pods (notes/gateway-conformance.md)"
    assert not gateway_kubelet.errors
    ips = {p.status.podIP for p in pods}
    assert len(ips) == len(pods)

    v1 = [p for p in pods if p.metadata.name.startswith("infra-backend-v1-")]
    assert len(v1) == 2
    for pod in v1:
        request = urllib.request.Request(
            f"http://{pod.status.podIP}:3000/probe?x=1",
            headers={"Host": "example.com", "X-Echo-Set-Header": "X-Foo:bar"},
        )
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(request, timeout=5) as r:
            assert r.headers["Content-Type"] == "application/json"
            assert r.headers["X-Foo"] == "bar"
            body = json.load(r)
        assert body["pod"] == pod.metadata.name
        assert body["namespace"] == "gateway-conformance-infra"
        assert (body["path"], body["host"]) == ("/probe?x=1", "example.com")

    def slice_ready() -> bool:
        slices = kube.list(
            EndpointSlice,
            namespace="gateway-conformance-infra",
            labels={"kubernetes.io/service-name": "infra-backend-v1"},
        )
        addresses = {
            a
            for s in slices
            for e in s.endpoints or []
            if e.conditions and e.conditions.ready
            for a in e.addresses
        }
        return addresses == {p.status.podIP for p in v1}

    wait_until(slice_ready, 60, "infra-backend-v1's EndpointSlice")

    # tls-backend serves TLS on 8443 with the certificate of its secret volume.
    tls = next(p for p in pods if p.metadata.name.startswith("tls-backend-"))
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    raw = socket.create_connection((tls.status.podIP, 8443), timeout=5)
    with context.wrap_socket(raw, server_hostname="abc.example.com") as conn:
        cert = conn.getpeercert(binary_form=True)
    assert cert
