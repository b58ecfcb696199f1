"""The externalAuth Policy's validation (NIC's validateExternalAuth messages) and
its translation (NIC's port choice, a second one in a context, sslVerify's
item, authSigninURI warned)."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from ferryman.kinds.policy.parse.policy import Policy, parse_policy
from ferryman.kinds.policy.records.attach import attach
from ferryman.kinds.policy.records.base import ROUTE, Owner
from ferryman.kinds.policy.records.external import External
from ferryman.resources.policy_ref import PolicyRef
from testkit.harness import tls_secret
from testkit.pki import authority, ca_secret
from testkit.policy_objects import Objects


def _raw(**external: Any) -> dict[str, Any]:
    return {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "Policy",
        "metadata": {"name": "ext", "namespace": "ns"},
        "spec": {"externalAuth": {"authURI": "/auth", "authServiceName": "svc", **external}},
    }


def _problems(**external: Any) -> list[str]:
    return [str(p) for p in parse_policy(_raw(**external)).problems]


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"authURI": ""}, "spec.externalAuth.authURI: Required value: authURI is required"),
        ({"authURI": "auth"}, 'spec.externalAuth.authURI: Invalid value: "auth"'),
        ({"authServiceName": "a/b/c"}, "service reference must be in the format"),
        ({"authServiceName": "Bad_Name"}, "spec.externalAuth.authServiceName.name: Invalid"),
        ({"authServicePorts": [0]}, "spec.externalAuth.authServicePorts[0]: Invalid value: 0"),
        ({"authSnippets": "x"}, "snippets must be enabled via cli argument -enable-snippets"),
        ({"sslVerify": True}, "sslEnabled must be true when sslVerify is true"),
        (
            {"sslEnabled": True, "trustedCertSecret": "ca"},
            "sslVerify must be true when trustedCertSecret is set",
        ),
        ({"sslEnabled": True, "sniName": "a;b"}, "spec.externalAuth.sniName: Invalid value"),
        ({"sslVerifyDepth": -1}, "must be a non-negative integer"),
    ],
)
def test_nics_rules(fields: dict[str, Any], problem: str) -> None:
    found = _problems(**fields)
    assert any(problem in p for p in found), found


class _Reads:
    def __init__(self, *policies: dict[str, Any]) -> None:
        self.policies: dict[str, Policy] = {}
        for raw in policies:
            parsed = parse_policy(raw).resource
            assert parsed is not None
            self.policies[parsed.meta.name] = parsed

    def policy(self, namespace: str, name: str) -> Policy | None:
        return self.policies.get(name)

    def granted(self, *reference: Any) -> bool:
        return True  # outside tenant mode

    def secret_read(self, namespace: str, name: str, parser: Any) -> Any:
        raise AssertionError("externalAuth reads no Secret")


OWNER = Owner("ns", "vs", "ns", "vs", ROUTE, "/")


def _named(name: str, **external: Any) -> dict[str, Any]:
    raw = _raw(**external)
    raw["metadata"]["name"] = name
    return raw


def test_port_and_service_namespace_as_nic_chooses() -> None:
    reads = _Reads(
        _named("plain"),
        _named("tls", sslEnabled=True),
        _named("ports", authServicePorts=[8080, 9090], authServiceName="other/auth"),
    )
    got = {
        n: attach([PolicyRef(n, "ns")], OWNER, reads).configs[External]
        for n in ("plain", "tls", "ports")
    }
    assert got["plain"] == External("ns/svc:80", "/auth", False)
    assert got["tls"] == External("ns/svc:443", "/auth", True)
    assert got["ports"] == External("other/auth:8080", "/auth", False)
    assert got["plain"].item() == "P|x|ns/svc:80|L2F1dGg=|0"


def test_second_policy_ignored_sslverify_item_signin_warned() -> None:
    reads = _Reads(
        _named("one"),
        _named("two", authURI="/other"),
        _named("verify", sslEnabled=True, sslVerify=True),
        _named("signin", authSigninURI="/signin"),
    )
    both = attach([PolicyRef("one", "ns"), PolicyRef("two", "ns")], OWNER, reads)
    assert both.configs[External].auth_uri == "/auth" and not both.error
    assert both.warnings == (
        "Multiple external auth policies in the same context is not valid. "
        "External auth policy ns/two will be ignored",
    )
    verify = attach([PolicyRef("verify", "ns")], OWNER, reads)
    assert not verify.error and not verify.warnings
    # No trustedCertSecret: the system's CAs ("-"), depth 1, the Service's name.
    item = verify.configs[External].item().split("|")
    assert item[-3:] == ["-", "1", base64.b64encode(b"svc.ns.svc").decode()]
    signin = attach([PolicyRef("signin", "ns")], OWNER, reads)
    assert not signin.error and "authSigninURI is not implemented yet" in signin.warnings[0]


def test_ssl_verify_with_a_trusted_cert_secret() -> None:
    """The CA Secret's certificates, sslVerifyDepth and sniName in the item; a
    Secret of another type: the context answers 500 with NIC's kind of message."""
    ca = authority("auth-ca").cert_pem
    objs = Objects(
        _named(
            "v",
            sslEnabled=True,
            sslVerify=True,
            trustedCertSecret="ca",
            sslVerifyDepth=2,
            sniName="auth.test",
        ),
        _named("w", sslEnabled=True, sslVerify=True, trustedCertSecret="tls"),
        {**ca_secret("ca", ca, namespace="ns"), "kind": "Secret"},
        {**tls_secret("tls", ["x"]), "metadata": {"name": "tls", "namespace": "ns"}},
    )
    v = attach([PolicyRef("v", "ns")], OWNER, objs)
    item = v.configs[External].item().split("|")
    assert item[4:5] == ["1"] and item[-2:] == ["2", base64.b64encode(b"auth.test").decode()]
    assert base64.b64decode(item[-3]) == ca
    w = attach([PolicyRef("w", "ns")], OWNER, objs)
    assert w.error
    assert "references a secret ns/tls of a wrong type 'kubernetes.io/tls'" in w.warnings[0]


class _Tenant(Objects):
    """Tenant mode with no ReferenceGrant: only same-namespace references."""

    def granted(self, *reference: Any) -> bool:
        return False


def test_a_trusted_cert_secret_of_another_namespace_needs_a_grant() -> None:
    ca = authority("auth-ca").cert_pem
    objs = _Tenant(
        _named("v", sslEnabled=True, sslVerify=True, trustedCertSecret="other/ca"),
        {**ca_secret("ca", ca, namespace="other"), "kind": "Secret"},
    )
    v = attach([PolicyRef("v", "ns")], OWNER, objs)
    assert v.error and "ExternalAuth policy ns/v:" in v.warnings[0]
    assert "Secret other/ca is in another namespace" in v.warnings[0]
