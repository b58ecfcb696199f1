"""The jwt, ingressMTLS and egressMTLS translators: NIC's contexts, multiples and
Secret messages, and what reaches the P item or M record."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from ferryman.kinds.policy.records.attach import Attached, attach
from ferryman.kinds.policy.records.base import ROUTE, SPEC, Owner
from ferryman.kinds.policy.records.egress_mtls import Egress
from ferryman.kinds.policy.records.ingress_mtls import ClientCerts
from ferryman.kinds.policy.records.jwt import JWTAuth
from ferryman.resources.policy_ref import PolicyRef
from testkit.jose import jwk, jwk_secret, jwks
from testkit.pki import authority, ca_secret, issue
from testkit.policy_objects import Objects


def _policy(name: str, **spec: Any) -> dict[str, Any]:
    md = {"name": name, "namespace": "ns"}
    return {"apiVersion": "k8s.nginx.org/v1", "kind": "Policy", "metadata": md, "spec": spec}


def _secret(obj: dict[str, Any]) -> dict[str, Any]:
    return {**obj, "kind": "Secret", "metadata": {**obj["metadata"], "namespace": "ns"}}


def _tls(name: str) -> dict[str, Any]:
    issued = issue("unit-ca", name)
    data = {"tls.crt": issued.cert_pem, "tls.key": issued.key_pem}
    return {
        "kind": "Secret",
        "metadata": {"name": name, "namespace": "ns"},
        "type": "kubernetes.io/tls",
        "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
    }


def _attach(objs: Objects, *names: str, context: str = ROUTE, tls: bool = True) -> Attached:
    owner = Owner("ns", "cafe", "ns", "cafe", context, "/", tls, "ferryman")
    return attach([PolicyRef(n, "ns") for n in names], owner, objs)


KEYS = _secret(jwk_secret("keys", jwks(jwk("HS256", "a"))))
CA = _secret(ca_secret("ca", authority("unit-ca").cert_pem))


def test_jwt_item_carries_realm_token_and_keys() -> None:
    objs = Objects(
        _policy("j", jwt={"realm": 'My \\"API\\"', "secret": "keys", "token": "$arg_t"}), KEYS
    )
    (config,) = _attach(objs, "j").configs.values()
    assert isinstance(config, JWTAuth)
    assert (config.realm, config.token) == ('My "API"', "$arg_t")  # as NGINX reads NIC's quotes
    assert config.item().startswith("P|j|")


def test_second_jwt_is_ignored_with_nics_warning() -> None:
    objs = Objects(
        _policy("j", jwt={"realm": "a", "secret": "keys"}),
        _policy("k", jwt={"realm": "b", "secret": "keys"}),
        KEYS,
    )
    attached = _attach(objs, "j", "k")
    (config,) = attached.configs.values()
    assert isinstance(config, JWTAuth) and config.realm == "a"
    assert attached.warnings == (
        "Multiple jwt policies in the same context is not valid. JWT policy ns/k will be ignored",
    )


@pytest.mark.parametrize(
    ("secret", "message"),
    [
        (None, "JWT policy ns/j references an invalid secret ns/keys: secret doesn't exist"),
        ({**KEYS, "type": "Opaque"}, "references a secret ns/keys of a wrong type 'Opaque'"),
    ],
)
def test_jwt_secret_problems(secret: dict[str, Any] | None, message: str) -> None:
    objs = Objects(
        _policy("j", jwt={"realm": "a", "secret": "keys"}), *([secret] if secret else [])
    )
    attached = _attach(objs, "j")
    assert attached.error and message in attached.warnings[0]


def test_ingress_mtls_record() -> None:
    objs = Objects(
        _policy(
            "m",
            ingressMTLS={"clientCertSecret": "ca", "verifyClient": "optional", "verifyDepth": 2},
        ),
        CA,
    )
    (config,) = _attach(objs, "m", context=SPEC).configs.values()
    assert isinstance(config, ClientCerts)
    mode, depth, digest, certs = config.record().split(" ")
    assert (mode, depth, len(digest)) == ("optional", "2", 16)
    assert base64.b64decode(certs) == authority("unit-ca").cert_pem


@pytest.mark.parametrize(
    ("context", "tls", "message"),
    [
        (ROUTE, True, "IngressMTLS policy ns/m is not allowed in the route context"),
        (SPEC, False, "TLS must be enabled for IngressMTLS policy ns/m"),
    ],
)
def test_ingress_mtls_only_in_spec_with_tls(context: str, tls: bool, message: str) -> None:
    objs = Objects(_policy("m", ingressMTLS={"clientCertSecret": "ca"}), CA)
    attached = _attach(objs, "m", context=context, tls=tls)
    assert attached.error and attached.warnings == (message,)


def test_egress_item_and_warnings() -> None:
    spec = {
        "tlsSecret": "client",
        "serverName": True,
        "sslName": "app.test",
        "protocols": "TLSv1.3",
        "sessionReuse": False,
    }
    attached = _attach(Objects(_policy("e", egressMTLS=spec), _tls("client")), "e")
    (config,) = attached.configs.values()
    assert isinstance(config, Egress) and config.name == "app.test"
    assert config.chain == issue("unit-ca", "client").cert_pem
    # protocols ride in the item (the module's TLS context); sessionReuse: false
    # is what ferryman's balancer does anyway (it resumes no upstream session).
    assert config.protocols == ("TLSv1.3",) and config.item().split("|")[-2] == "TLSv1.3"
    assert attached.warnings == ()


def test_egress_nic_default_protocols_and_ciphers_leave_nginxs() -> None:
    spec = {"protocols": "TLSv1 TLSv1.1 TLSv1.2", "ciphers": "DEFAULT"}
    attached = _attach(Objects(_policy("e", egressMTLS=spec)), "e")
    (config,) = attached.configs.values()
    assert isinstance(config, Egress) and (config.protocols, config.ciphers) == ((), "")
    assert len(config.item().split("|")) == 5  # P|e|chain|key|name: as before


def test_egress_server_name_off_sends_no_name() -> None:
    attached = _attach(Objects(_policy("e", egressMTLS={"sslName": "app.test"})), "e")
    (config,) = attached.configs.values()
    assert isinstance(config, Egress) and (config.name, config.chain) == ("", b"")


@pytest.mark.parametrize(
    ("spec", "objs", "message"),
    [
        (
            {"tlsSecret": "none"},
            (),
            "EgressMTLS policy ns/e references an invalid secret ns/none: secret doesn't exist",
        ),
        (
            {"tlsSecret": "ca"},
            (CA,),
            "references a secret ns/ca of a wrong type 'nginx.org/ca', must be 'kubernetes.io/tls'",
        ),
        ({"trustedCertSecret": "client"}, (_tls("client"),), "must be 'nginx.org/ca'"),
    ],
)
def test_egress_secret_problems(
    spec: dict[str, Any], objs: tuple[dict[str, Any], ...], message: str
) -> None:
    attached = _attach(Objects(_policy("e", egressMTLS=spec), *objs), "e")
    assert attached.error and message in attached.warnings[0]


def _tls_with_ca(name: str, ca: bytes | None) -> dict[str, Any]:
    obj = _tls(name)
    if ca is not None:
        obj["data"]["ca.crt"] = base64.b64encode(ca).decode()
    return obj


def _proxy_ssl(objs: Objects) -> Any:
    """ingress-nginx's proxy-ssl-verify on with proxy-ssl-secret ``client``, as
    kinds/ingress/parse/ingress_nginx_access.py hands it to the translator."""
    from ferryman.kinds.policy.parse.policy import EgressMTLS, Policy
    from ferryman.kinds.policy.records.egress_mtls import translate
    from ferryman.resources.meta import Meta

    model = EgressMTLS(
        tls_secret="client",
        verify_server=True,
        verify_depth=2,
        ssl_name="app.test",
        trusted_in_tls_secret=True,
    )
    owner = Owner("ns", "cafe", "ns", "cafe", SPEC, "/", True, "ferryman")
    return translate(Policy(Meta("cafe", "ns"), "", model), "(annotations)", None, owner, objs)


def test_proxy_ssl_verify_trusts_the_tls_secrets_own_ca() -> None:
    """ingress-nginx's proxy-ssl-secret holds the backend's CAs in ca.crt beside
    the client pair: the item verifies with them; without ca.crt, or with one
    that is not a certificate, the routes fail closed (an error, never unverified)."""
    ca = authority("backend-ca").cert_pem
    step = _proxy_ssl(Objects(_secret(_tls_with_ca("client", ca))))
    assert not step.error and isinstance(step.config, Egress)
    assert step.config.trusted == ca and step.config.depth == 2
    assert step.config.chain == issue("unit-ca", "client").cert_pem
    missing = _proxy_ssl(Objects(_secret(_tls_with_ca("client", None))))
    assert missing.error and missing.config is None
    assert "ns/client: it has no data field ca.crt" in missing.warnings[0]
    junk = _proxy_ssl(Objects(_secret(_tls_with_ca("client", b"junk"))))
    assert junk.error and "ca.crt must hold a valid CERTIFICATE PEM block" in junk.warnings[0]
    absent = _proxy_ssl(Objects())
    assert absent.error and "secret doesn't exist" in absent.warnings[0]
