"""What attached Gateways serve (kinds/gateway/translate/serving.py): statuses,
listeners, sockets and the ports a Gateway on every address keeps."""

from __future__ import annotations

from ferryman.kinds.gateway.records.addresses import NoAddress
from ferryman.kinds.gateway.records.servers import ANY_ADDRESS
from ferryman.kinds.gateway.translate.serving import serving
from ferryman.resources.meta import ObjectRef
from tests.unit.test_gateway_attach import BACKEND, HTTP, gateway, route, run

HTTPS = {
    "name": "https",
    "port": 443,
    "protocol": "HTTPS",
    "tls": {"certificateRefs": [{"name": "cert"}]},
}
CERTS = {("gw", "cert"): "c1"}


def test_a_gateway_on_every_address_serves_its_listeners_and_keeps_their_ports() -> None:
    g = gateway(HTTP, HTTPS)
    att = run([g], [route("r", rules=[BACKEND])], secrets={("gw", "cert"): None})
    out = serving([g], {("gw", "g"): ANY_ADDRESS}, att, ("10.0.0.1",), lambda ns, n: CERTS[(ns, n)])
    assert out.sockets == {(ANY_ADDRESS, 80, False), (ANY_ADDRESS, 443, True)}
    assert [(s.listener.name, s.cert_id) for s in out.served] == [("http", None), ("https", "c1")]
    assert set(out.held) == {80, 443} and out.asked == {80, 443}
    # Its status shows the addresses the Ingresses show.
    body = out.statuses[ObjectRef("Gateway", "gw", "g")]
    assert body["addresses"] == [{"type": "IPAddress", "value": "10.0.0.1"}]


def test_a_gateway_on_its_own_address_keeps_no_port_from_the_ingresses() -> None:
    g = gateway(HTTP)
    att = run([g], [route("r", rules=[BACKEND])])
    out = serving([g], {("gw", "g"): "127.0.0.100"}, att, (), lambda ns, n: None)
    assert out.sockets == {("127.0.0.100", 80, False)}
    assert out.held == {} and out.asked == {80}


def test_a_gateway_without_an_address_serves_nothing_and_says_why() -> None:
    g = gateway(HTTP)
    att = run([g], [route("r", rules=[BACKEND])])
    outcome = NoAddress(True, "AddressNotUsable", "the pool is used up")
    out = serving([g], {("gw", "g"): outcome}, att, (), lambda ns, n: None)
    assert out.served == [] and out.sockets == set() and out.asked == set()
    conditions = out.statuses[ObjectRef("Gateway", "gw", "g")]["conditions"]
    assert any(c["reason"] == "AddressNotUsable" for c in conditions)
