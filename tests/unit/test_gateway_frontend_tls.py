"""A Gateway's spec.tls.frontend (client certificate validation): the parse
(the CRD's rules), each HTTPS listener's validation resolved or why not, the
listener conditions that makes, the K records and the Gateway's
InsecureFrontendValidationMode condition; through the translator, the K
record follows the ConfigMap (a push, no new listen line)."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

from ferryman.engine.settings import GatewaySettings, ListenSettings
from ferryman.kinds.gateway.parse.frontend_tls import ALLOW_INSECURE_FALLBACK, ALLOW_VALID_ONLY
from ferryman.kinds.gateway.parse.gateway_api import parse_gateway
from ferryman.kinds.gateway.records.frontend_tls import (
    INSECURE_CONDITION,
    client_records,
    resolve,
    with_insecure_mode,
)
from ferryman.kinds.gateway.records.listeners import listener_status
from ferryman.kinds.gateway.records.servers import Served
from ferryman.resources.meta import ObjectRef
from ferryman.resources.reference_grant import parse_reference_grant
from testkit.controller_kit import Kit
from testkit.pki import authority

CA = authority("unit-frontend-ca").cert_pem.decode()
OTHER_CA = authority("unit-frontend-other").cert_pem.decode()


def _ref(name: str = "ca", kind: str = "ConfigMap", **more: str) -> dict[str, str]:
    return {"group": "", "kind": kind, "name": name, **more}


def _validation(*refs: dict[str, str], mode: str | None = None) -> dict[str, Any]:
    v: dict[str, Any] = {"caCertificateRefs": list(refs) or [_ref()]}
    if mode is not None:
        v["mode"] = mode
    return {"validation": v}


def _gateway_obj(frontend: Any, namespace: str = "default") -> dict[str, Any]:
    def https(name: str, port: int) -> dict[str, Any]:
        return {"name": name, "port": port, "protocol": "HTTPS", "hostname": f"{name}.example.com",
                "tls": {"certificateRefs": [{"kind": "Secret", "name": "cert"}]}}  # fmt: skip

    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": namespace, "generation": 4},
        "spec": {
            "gatewayClassName": "ferryman",
            "tls": {"frontend": frontend},
            "listeners": [
                https("a", 443),
                https("b", 8443),
                {"name": "http", "port": 443 + 37000, "protocol": "HTTP"},
            ],
        },
    }


def _gateway(frontend: Any) -> Any:
    parsed = parse_gateway(_gateway_obj(frontend))
    assert parsed.resource is not None, parsed.message()
    return parsed.resource


def _maps(**cas: str) -> Any:
    def get(namespace: str, name: str) -> Any:
        key = f"{namespace}/{name}"
        return {"data": {"ca.crt": cas[key]}} if key in cas else None

    return get


def test_parse_default_per_port_and_modes() -> None:
    gw = _gateway(
        {
            "default": _validation(),
            "perPort": [
                {"port": 8443, "tls": _validation(_ref("other"), mode=ALLOW_INSECURE_FALLBACK)},
                {"port": 9443, "tls": {}},
            ],
        }
    )
    front = gw.frontend
    assert front is not None
    assert front.for_port(443) == front.default
    assert front.default is not None and front.default.mode == ALLOW_VALID_ONLY
    port_8443 = front.for_port(8443)
    assert port_8443 is not None and port_8443.insecure and port_8443.refs[0].name == "other"
    assert front.for_port(9443) is None  # a port's entry without validation: none there
    assert front.insecure
    assert not _gateway({"default": _validation()}).frontend.insecure


def test_parse_refuses_what_the_crd_refuses() -> None:
    def problem(frontend: Any) -> str:
        parsed = parse_gateway(_gateway_obj(frontend))
        assert parsed.resource is None
        return parsed.message()

    assert "default" in problem({"perPort": []})
    assert "caCertificateRefs" in problem({"default": {"validation": {"caCertificateRefs": []}}})
    assert "mode" in problem({"default": _validation(mode="Sometimes")})
    assert "kind" in problem({"default": {"validation": {"caCertificateRefs": [{"name": "x"}]}}})
    twice = {"port": 8443, "tls": _validation()}
    assert "port" in problem({"default": _validation(), "perPort": [twice, twice]})
    assert "port" in problem({"default": _validation(), "perPort": [{"port": 0, "tls": {}}]})
    many = [_ref(f"c{i}") for i in range(17)]
    assert "at most 16" in problem({"default": _validation(*many)})


def test_resolve_each_https_listener_or_say_why() -> None:
    maps = _maps(**{"default/ca": CA, "default/other": OTHER_CA, "elsewhere/ca": CA,
                    "default/empty": "no certificate here"})  # fmt: skip

    def outcome(frontend: Any, grants: Any = ()) -> dict[str, Any]:
        gw = _gateway(frontend)
        front = resolve([gw], list(grants), maps)
        out: dict[str, Any] = {}
        for lst in gw.listeners:
            problem = front.problem(gw, lst)
            value = front.value(("default", "gw"), lst)
            assert problem is None or value is None
            out[lst.name] = problem[0] if problem else (value.split(" ")[0] if value else None)
        return out

    fallback = _validation(_ref("other"), mode=ALLOW_INSECURE_FALLBACK)
    assert outcome({"default": _validation(), "perPort": [{"port": 8443, "tls": fallback}]}) == {
        "a": "required", "b": "optional", "http": None,
    }  # fmt: skip
    kind = {"default": _validation(_ref("svc", kind="Service"))}
    assert outcome(kind)["a"] == "InvalidCACertificateKind"
    assert outcome({"default": _validation(_ref("gone"))})["a"] == "InvalidCACertificateRef"
    assert outcome({"default": _validation(_ref("empty"))})["b"] == "InvalidCACertificateRef"
    across = {"default": _validation(_ref(namespace="elsewhere"))}
    assert outcome(across)["a"] == "RefNotPermitted"
    grant = parse_reference_grant(
        {"metadata": {"name": "g", "namespace": "elsewhere"},
         "spec": {"from": [{"group": "gateway.networking.k8s.io", "kind": "Gateway",
                            "namespace": "default"}],
                  "to": [{"group": "", "kind": "ConfigMap"}]}}
    ).resource  # fmt: skip
    assert grant is not None
    assert outcome(across, [grant])["a"] == "required"
    # One reference usable of two: ResolvedRefs False, yet some CA is valid.
    gw = _gateway({"default": _validation(_ref(), _ref("gone"))})
    problem = resolve([gw], [], maps).problem(gw, gw.listeners[0])
    assert problem is not None and problem[0] == "InvalidCACertificateRef"
    assert "default/gone" in problem[1] and problem[2] is False


def test_the_k_value_carries_the_cas_and_changes_with_them() -> None:
    gw = _gateway({"default": _validation()})
    value = resolve([gw], [], _maps(**{"default/ca": CA})).value(("default", "gw"), gw.listeners[0])
    assert value is not None
    mode, depth, digest, cas = value.split(" ")
    assert (mode, depth) == ("required", "10")
    assert base64.b64decode(cas).decode() == CA
    changed = resolve([gw], [], _maps(**{"default/ca": OTHER_CA}))
    other = changed.value(("default", "gw"), gw.listeners[0])
    assert other is not None and other.split(" ")[2] != digest


def test_listener_conditions_of_a_validation_problem() -> None:
    gw = _gateway({"default": _validation(_ref("gone"))})
    lst = gw.listeners[0]

    def conditions(frontend: Any) -> dict[str, tuple[bool, str]]:
        status = listener_status(gw, lst, [], lambda ns, name: None, None, frontend=frontend)
        return {c.type: (c.status, c.reason) for c in status.conditions}

    gone = "ConfigMap default/gone does not exist"
    none_valid = conditions(("InvalidCACertificateRef", gone, True))
    assert none_valid["Accepted"] == (False, "NoValidCACertificate")
    assert none_valid["ResolvedRefs"] == (False, "InvalidCACertificateRef")
    assert none_valid["Programmed"][0] is False
    some_valid = conditions(("RefNotPermitted", "no grant", False))
    assert some_valid["Accepted"] == (True, "Accepted")
    assert some_valid["ResolvedRefs"] == (False, "RefNotPermitted")
    assert some_valid["Programmed"][0] is False  # never served without its validation
    assert conditions(None)["Programmed"] == (True, "Programmed")


def test_k_records_number_listeners_per_socket() -> None:
    gw = _gateway({"default": _validation()})
    a, b, _ = gw.listeners
    served = [
        Served("10.0.0.1", a, {}, "cert", "required 10 id CAS"),
        Served("10.0.0.1", b, {}, "cert", None),
        Served("10.0.0.1", a, {}, "cert", "optional 10 id CAS"),
    ]
    assert client_records(served) == {
        "10.0.0.1:443#0v": "required 10 id CAS",
        "10.0.0.1:443#1v": "optional 10 id CAS",
    }


def test_insecure_fallback_is_a_gateway_condition() -> None:
    ref = ObjectRef("Gateway", "default", "gw")
    fallback = _validation(mode=ALLOW_INSECURE_FALLBACK)
    for frontend, shown in (
        ({"default": fallback}, True),
        ({"default": _validation(), "perPort": [{"port": 8443, "tls": fallback}]}, True),
        ({"default": _validation()}, False),
    ):
        statuses: dict[ObjectRef, Any] = {ref: {"conditions": [{"type": "Accepted"}]}}
        with_insecure_mode(statuses, [_gateway(frontend)])
        types = {c["type"]: c for c in statuses[ref]["conditions"]}
        assert (INSECURE_CONDITION in types) == shown
        if shown:
            condition = types[INSECURE_CONDITION]
            assert (condition["status"], condition["reason"]) == ("True", "ConfigurationChanged")
            assert condition["observedGeneration"] == 4


def _secret() -> dict[str, Any]:
    from testkit.pki import issue

    pair = issue("unit-frontend-ca", "a.example.com", server=True)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {"name": "cert", "namespace": "default"},
        "data": {"tls.crt": base64.b64encode(pair.chain_pem).decode(),
                 "tls.key": base64.b64encode(pair.key_pem).decode()},
    }  # fmt: skip


def _config_map(pem: str) -> dict[str, Any]:
    meta = {"name": "ca", "namespace": "default"}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"ca.crt": pem}}


def test_the_translator_pushes_k_records_that_follow_the_config_map(tmp_path: Path) -> None:
    kit = Kit(
        tmp_path,
        gateway=GatewaySettings(enabled=True, addresses=("10.0.0.1",)),
        listen=ListenSettings(http_port=18080, https_port=18443),
    )
    gc = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
          "metadata": {"name": "ferryman", "generation": 1},
          "spec": {"controllerName": "ferryman.io/gateway-controller"}}  # fmt: skip
    kit.add(gc, _secret(), _config_map(CA), _gateway_obj({"default": _validation()}))
    asyncio.run(kit.drain())
    records = kit.dataplane.records
    first = records[("K", "10.0.0.1:443#0v")]
    assert first.startswith("required 10 ")
    assert ("K", "10.0.0.1:8443#0v") in records
    # Its W records say a K record is required ("v"): no handshake without it.
    assert records[("W", "10.0.0.1:443/a.example.com")].split(" ")[1] == "0v"
    listens = kit.dataplane.files["gateway-listens.conf"]
    kit.add(_config_map(OTHER_CA))
    asyncio.run(kit.drain())
    assert records[("K", "10.0.0.1:443#0v")] != first
    assert base64.b64decode(records[("K", "10.0.0.1:443#0v")].split(" ")[3]).decode() == OTHER_CA
    assert kit.dataplane.files["gateway-listens.conf"] == listens  # no new socket: no reload
    kit.add(_gateway_obj({"default": _validation(_ref("gone"))}))
    asyncio.run(kit.drain())
    assert ("K", "10.0.0.1:443#0v") not in kit.dataplane.records
    status = kit.gateway_statuses[ObjectRef("Gateway", "default", "gw")]
    a = next(s for s in status["listeners"] if s["name"] == "a")
    reasons = {c["type"]: c["reason"] for c in a["conditions"]}
    assert reasons["Accepted"] == "NoValidCACertificate"
    assert reasons["ResolvedRefs"] == "InvalidCACertificateRef"
