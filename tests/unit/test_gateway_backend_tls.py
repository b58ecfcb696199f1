"""BackendTLSPolicy: the parse (the CRD's rules), the resolution (conflicts,
sections, CA references, statuses per ancestor Gateway), the U item's TLS
field and the status writer's ancestors."""

from __future__ import annotations

import base64
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ferryman.kinds.gateway.parse.backend_tls import parse_backend_tls_policy
from ferryman.kinds.gateway.parse.gateway_api import parse_http_route
from ferryman.kinds.gateway.records.attach import RouteEntry
from ferryman.kinds.gateway.records.backend_tls import BackendTLS, resolve
from ferryman.kinds.gateway.records.routes import gateway_record
from ferryman.report.gateway_status import desired, shows
from ferryman.resources.meta import ObjectRef
from testkit.pki import authority

CONTROLLER = "ferryman.io/gateway-controller"


def _policy(name: str = "p", age: str = "2026-01-01T00:00:00Z", **validation: Any) -> Any:
    return {
        "metadata": {"name": name, "namespace": "default", "creationTimestamp": age,
                     "generation": 2},
        "spec": {
            "targetRefs": [{"group": "", "kind": "Service", "name": "svc"}],
            "validation": {
                "caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": "ca"}],
                "hostname": "abc.example.com",
                **validation,
            },
        },
    }  # fmt: skip


def _parsed(obj: Any) -> Any:
    parsed = parse_backend_tls_policy(obj)
    assert parsed.resource is not None, parsed.message()
    return parsed.resource


def _ca_map(pem: str) -> Any:
    return {"metadata": {"name": "ca", "namespace": "default"}, "data": {"ca.crt": pem}}


CA = authority("unit-btls-ca").cert_pem.decode()


def _service(port_name: str | None = "btls") -> Any:
    return {"spec": {"ports": [{"port": 443, **({"name": port_name} if port_name else {})}]}}


def _conditions(status: Any, gateway: str = "gw") -> dict[str, tuple[str, str]]:
    for a in status["ancestors"]:
        if a["ancestorRef"]["name"] == gateway:
            return {c["type"]: (c["status"], c["reason"]) for c in a["conditions"]}
    raise AssertionError(f"no ancestor {gateway}: {status}")


USED = {("default", "svc", 443): {("default", "gw")}}


def test_parse_keeps_the_validation() -> None:
    p = _parsed(_policy(subjectAltNames=[{"type": "URI", "uri": "spiffe://a/b"}]))
    assert p.hostname == "abc.example.com"
    assert [(r.kind, r.name) for r in p.ca_refs] == [("ConfigMap", "ca")]
    assert [(s.type, s.value) for s in p.sans] == [("URI", "spiffe://a/b")]


def test_parse_refuses_what_the_crd_refuses() -> None:
    both = _policy(wellKnownCACertificates="System")
    assert parse_backend_tls_policy(both).resource is None
    neither = _policy()
    del neither["spec"]["validation"]["caCertificateRefs"]
    assert "either" in parse_backend_tls_policy(neither).message()
    bad_san = _policy(subjectAltNames=[{"type": "Hostname", "uri": "spiffe://a"}])
    assert parse_backend_tls_policy(bad_san).resource is None
    upper = _policy(hostname="ABC.example.com")
    assert parse_backend_tls_policy(upper).resource is None
    twice = _policy()
    twice["spec"]["targetRefs"] *= 2
    assert "sectionName" in parse_backend_tls_policy(twice).message()


@given(st.text(max_size=40))
def test_a_uri_san_reaching_the_record_has_no_space_or_control_character(uri: str) -> None:
    parsed = parse_backend_tls_policy(_policy(subjectAltNames=[{"type": "URI", "uri": uri}]))
    if parsed.resource is not None:
        assert uri and all(0x21 <= ord(c) <= 0x7E for c in uri)
        state = resolve([parsed.resource], USED, lambda ns, n: _service(),
                        lambda ns, n: _ca_map(CA), CONTROLLER)  # fmt: skip
        item = state.by_backend[("default", "svc", 443)].item()
        assert " " not in item and "|" not in item
        assert base64.b64decode(item.split(".")[2]).decode() == "U" + uri


def test_an_accepted_policy_resolves_its_backend_and_says_so_per_gateway() -> None:
    used = {("default", "svc", 443): {("default", "gw"), ("default", "gw2")}}
    state = resolve([_parsed(_policy())], used, lambda ns, n: _service(),
                    lambda ns, n: _ca_map(CA), CONTROLLER)  # fmt: skip
    tls = state.by_backend[("default", "svc", 443)]
    assert tls.usable and tls.hostname == "abc.example.com" and b"BEGIN CERTIFICATE" in tls.cas
    status = state.statuses[("default", "p")]
    assert [a["ancestorRef"]["name"] for a in status["ancestors"]] == ["gw", "gw2"]
    assert _conditions(status) == {"Accepted": ("True", "Accepted"),
                                   "ResolvedRefs": ("True", "ResolvedRefs")}  # fmt: skip
    assert all(c["observedGeneration"] == 2 for c in status["ancestors"][0]["conditions"])


def test_the_older_policy_wins_a_target_and_a_section_is_more_specific() -> None:
    old = _parsed(_policy("old"))
    young = _parsed(_policy("young", "2026-02-01T00:00:00Z", hostname="young.example.com"))
    sectioned_obj = _policy("sectioned", "2026-03-01T00:00:00Z", hostname="s.example.com")
    sectioned_obj["spec"]["targetRefs"][0]["sectionName"] = "btls"
    sectioned = _parsed(sectioned_obj)
    state = resolve([young, old, sectioned], USED, lambda ns, n: _service(),
                    lambda ns, n: _ca_map(CA), CONTROLLER)  # fmt: skip
    assert _conditions(state.statuses[("default", "old")])["Accepted"] == ("True", "Accepted")
    assert _conditions(state.statuses[("default", "young")])["Accepted"] == ("False", "Conflicted")
    assert _conditions(state.statuses[("default", "sectioned")])["Accepted"][0] == "True"
    assert state.by_backend[("default", "svc", 443)].hostname == "s.example.com"
    # Another port name: the Service-wide policy.
    state = resolve([young, old, sectioned], USED, lambda ns, n: _service("other"),
                    lambda ns, n: _ca_map(CA), CONTROLLER)  # fmt: skip
    assert state.by_backend[("default", "svc", 443)].hostname == "abc.example.com"


def test_ca_references_that_do_not_resolve() -> None:
    missing = resolve([_parsed(_policy())], USED, lambda ns, n: _service(),
                      lambda ns, n: None, CONTROLLER)  # fmt: skip
    assert _conditions(missing.statuses[("default", "p")]) == {
        "Accepted": ("False", "NoValidCACertificate"),
        "ResolvedRefs": ("False", "InvalidCACertificateRef"),
    }
    assert not missing.by_backend[("default", "svc", 443)].usable
    garbage = resolve([_parsed(_policy())], USED, lambda ns, n: _service(),
                      lambda ns, n: _ca_map("not a certificate"), CONTROLLER)  # fmt: skip
    assert _conditions(garbage.statuses[("default", "p")])["ResolvedRefs"][1] == (
        "InvalidCACertificateRef"
    )
    kind = _policy(caCertificateRefs=[{"group": "", "kind": "Secret", "name": "ca"}])
    state = resolve([_parsed(kind)], USED, lambda ns, n: _service(),
                    lambda ns, n: _ca_map(CA), CONTROLLER)  # fmt: skip
    assert _conditions(state.statuses[("default", "p")]) == {
        "Accepted": ("False", "NoValidCACertificate"),
        "ResolvedRefs": ("False", "InvalidKind"),
    }


def test_system_cas_and_no_ancestor_without_a_route() -> None:
    system = _policy(wellKnownCACertificates="System")
    del system["spec"]["validation"]["caCertificateRefs"]
    state = resolve([_parsed(system)], {}, lambda ns, n: _service(), lambda ns, n: None,
                    CONTROLLER)  # fmt: skip
    assert state.by_backend == {} and state.statuses[("default", "p")] == {"ancestors": []}
    state = resolve([_parsed(system)], USED, lambda ns, n: _service(), lambda ns, n: None,
                    CONTROLLER)  # fmt: skip
    tls = state.by_backend[("default", "svc", 443)]
    assert tls.usable and tls.cas == b""


def _entry(tls: BackendTLS) -> RouteEntry:
    route = parse_http_route(
        {"metadata": {"name": "r", "namespace": "default"},
         "spec": {"parentRefs": [{"name": "gw"}],
                  "rules": [{"backendRefs": [{"name": "svc", "port": 443}]}]}}
    ).resource  # fmt: skip
    assert route is not None
    rule = route.rules[0]
    return RouteEntry("default/r", rule, rule.matches[0], (("default", "svc", 443, 1),),
                      tls=(tls,))  # fmt: skip


def test_the_u_item_carries_tls_and_an_unusable_policy_is_a_500() -> None:
    tls = BackendTLS(b"PEM", "abc.example.com", (("Hostname", "a.example.com"),))
    record, used = gateway_record([_entry(tls)])
    u = next(i for i in record.split(" ") if i.startswith("U|"))
    fields = u.split("|")
    assert fields[10].startswith("1.") and fields[11] == ""
    cas, name, sans = fields[12].split(".")
    assert base64.b64decode(cas) == b"PEM" and base64.b64decode(name) == b"abc.example.com"
    assert base64.b64decode(sans) == b"Ha.example.com"
    record, used = gateway_record([_entry(BackendTLS(b"", "x", (), usable=False))])
    assert "U|" not in record and "t.500." in record and used == frozenset()


def test_the_status_writer_stamps_ancestors_and_keeps_other_controllers() -> None:
    ref = ObjectRef("BackendTLSPolicy", "default", "p")
    accepted = {"type": "Accepted", "status": "True", "reason": "Accepted"}
    ours = {"ancestorRef": {"name": "gw", "namespace": "default"}, "controllerName": CONTROLLER,
            "conditions": [accepted]}  # fmt: skip
    theirs = {"ancestorRef": {"name": "x"}, "controllerName": "other/c", "conditions": []}
    out = desired(ref, {"ancestors": [ours]}, {"ancestors": [theirs]}, CONTROLLER, "NOW")
    assert out["ancestors"][0] == theirs
    mine = out["ancestors"][1]
    assert mine["conditions"][0]["lastTransitionTime"] == "NOW"
    assert mine["ancestorRef"]["kind"] == "Gateway"
    assert shows(ref, {"ancestors": list(reversed(out["ancestors"]))}, out)


def _gateway(**tls: Any) -> Any:
    from ferryman.kinds.gateway.parse.gateway_api import parse_gateway

    parsed = parse_gateway(
        {"metadata": {"name": "gw", "namespace": "default", "generation": 3},
         "spec": {"gatewayClassName": "ferryman", "tls": tls,
                  "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}}
    )  # fmt: skip
    assert parsed.resource is not None, parsed.message()
    return parsed.resource


def test_backend_client_certificates_resolve_or_say_why() -> None:
    from ferryman.kinds.gateway.records.backend_client_cert import client_certificates
    from ferryman.resources.secret import TLSPair

    pair = TLSPair(b"CHAIN", b"KEY")

    def read(namespace: str, name: str) -> TLSPair | str:
        return pair if name == "good" else "it does not exist"

    def ref(**r: str) -> dict[str, Any]:
        return {"backend": {"clientCertificateRef": r}}

    cases = {
        "good": (_gateway(**ref(name="good")), (True, "ResolvedRefs")),
        "missing": (_gateway(**ref(name="gone")), (False, "InvalidClientCertificateRef")),
        "kind": (_gateway(**ref(name="good", kind="ConfigMap")),
                 (False, "InvalidClientCertificateRef")),
        "grant": (_gateway(**ref(name="good", namespace="other")), (False, "RefNotPermitted")),
    }  # fmt: skip
    for what, (gw, want) in cases.items():
        out = client_certificates([gw], [], read)
        assert out.resolved[("default", "gw")][:2] == want, what
        assert (("default", "gw") in out.pairs) == want[0], what
    assert client_certificates([_gateway()], [], read).resolved == {}
    # The frontend half is another feature's (parse/frontend_tls.py).
    ca = {"group": "", "kind": "ConfigMap", "name": "ca"}
    front = {"default": {"validation": {"caCertificateRefs": [ca]}}}
    assert _gateway(frontend=front).backend_client_cert is None


def test_the_client_certificate_rides_in_the_u_item() -> None:
    tls = BackendTLS(b"", "abc.example.com", (), cert=b"CHAIN", key=b"KEY")
    fields = tls.item().split(".")
    assert len(fields) == 5 and fields[0] == "" and fields[2] == ""
    assert base64.b64decode(fields[3]) == b"CHAIN" and base64.b64decode(fields[4]) == b"KEY"
