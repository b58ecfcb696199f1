"""Policy: each of NIC's rules with NIC's message; the policies ferryman refuses, by name."""

from __future__ import annotations

from typing import Any

import pytest

from ferryman.kinds.policy.parse.policy import (
    APIKey,
    EgressMTLS,
    IngressMTLS,
    RateLimit,
    parse_policy,
)
from testkit.nic_edit import DELETE, edited
from testkit.nic_fixtures import POLICIES, policy

BY_NAME = {p["metadata"]["name"]: p for p in POLICIES}
EXACTLY_ONE = (
    'spec: Invalid value: "": must specify exactly one of: `accessControl`, `rateLimit`, '
    "`ingressMTLS`, `egressMTLS`, `basicAuth`, `apiKey`, `cache`, `cors`, `externalAuth`, "
    "`hsts`, `jwt`"
)
RL, JWT, CORS = "spec.rateLimit", "spec.jwt", "spec.cors"


def problems(name: str, *changes: tuple[str, Any]) -> list[str]:
    parsed = parse_policy(edited(BY_NAME[name], *changes))
    assert (parsed.resource is None) == bool(parsed.problems)
    return [str(p) for p in parsed.problems]


@pytest.mark.parametrize("name", list(BY_NAME))
def test_each_rich_policy_is_valid(name: str) -> None:
    assert problems(name) == []


def test_the_models_hold_nics_defaults() -> None:
    minimal = parse_policy(
        policy("r", {"rateLimit": {"rate": "5r/m", "key": "${uri}", "zoneSize": "1m"}})
    ).resource
    assert minimal is not None and minimal.policy == RateLimit(5, "m", "${uri}", 1024 * 1024)
    assert minimal.policy.reject_code == 503 and minimal.policy.log_level == "error"
    bare = parse_policy(
        policy("r", {"rateLimit": {"rate": "5r/s", "key": "${uri}", "zoneSize": "64"}})
    ).resource
    assert bare is not None and isinstance(bare.policy, RateLimit)
    assert bare.policy.zone_size == 64 * 1024  # NIC: a bare number is kilobytes
    mtls = parse_policy(policy("m", {"ingressMTLS": {"clientCertSecret": "ca"}})).resource
    assert mtls is not None and mtls.policy == IngressMTLS("ca", "on", 1)
    egress = parse_policy(policy("e", {"egressMTLS": {"tlsSecret": "c"}})).resource
    assert egress is not None and egress.policy == EgressMTLS(tls_secret="c")
    key = parse_policy(
        policy("k", {"apiKey": {"suppliedIn": {"query": ["key"]}, "clientSecret": "s"}})
    ).resource
    assert key is not None and key.policy == APIKey((), ("key",), "s")


def test_a_policy_without_spec_or_name() -> None:
    assert parse_policy({"metadata": {"name": "p"}}).message() == "spec: Required value"
    assert parse_policy({"metadata": {"name": "p"}, "spec": []}).message() == (
        'spec: Invalid value: "list": must be of type object'
    )
    assert parse_policy({"spec": {}}).message() == "metadata: Required value"


def test_exactly_one_policy() -> None:
    assert [str(p) for p in parse_policy(policy("p", {})).problems] == [EXACTLY_ONE]
    both = policy("p", {"basicAuth": {"secret": "s"}, "accessControl": {"allow": ["::1"]}})
    assert [str(p) for p in parse_policy(both).problems] == [EXACTLY_ONE]


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        ("oidc", "OpenID Connect needs NGINX Plus"),
        ("waf", "NGINX App Protect WAF is a commercial NGINX Plus module"),
        ("cache", "response caching is not implemented"),
        ("hsts", "the HSTS policy is not implemented"),
    ],
)
def test_policies_ferryman_does_not_offer_are_refused_by_name(kind: str, reason: str) -> None:
    found = [str(p) for p in parse_policy(policy("p", {kind: {"enable": True}})).problems]
    assert len(found) == 1
    assert found[0].startswith(f"spec.{kind}: Forbidden: not supported by ferryman: {reason}")


@pytest.mark.parametrize(
    ("name", "changes", "expected"),
    [
        (
            "allow",
            (("spec.accessControl.deny", ["10.0.0.1"]),),
            'spec.accessControl: Invalid value: "": must specify exactly one of: `allow` or `deny`',
        ),
        (
            "allow",
            (("spec.accessControl.allow[0]", "10.0.0.0/33"),),
            'spec.accessControl.allow[0]: Invalid value: "10.0.0.0/33": must be a CIDR or IP',
        ),
        (
            "allow",
            (("spec.accessControl.allow[0]", "10.0.0.0/255.0.0.0"),),
            'spec.accessControl.allow[0]: Invalid value: "10.0.0.0/255.0.0.0": '
            "must be a CIDR or IP",
        ),
        (
            "rate",
            ((f"{RL}.rate", "10r/h"),),
            f'{RL}.rate: Invalid value: "10r/h": must consist of numeric characters followed by '
            "a valid rate suffix. 'r/s|r/m (e.g. '16r/s',  or '32r/m',  or '64r/s', regex used "
            "for validation is '[1-9]\\d*r/[sSmM]')",
        ),
        ("rate", ((f"{RL}.rate", DELETE),), f"{RL}.rate: Required value"),
        (
            "rate",
            ((f"{RL}.zoneSize", "16k"),),
            f'{RL}.zoneSize: Invalid value: "16k": must be greater than 31k',
        ),
        (
            "rate",
            ((f"{RL}.zoneSize", "16"),),
            f'{RL}.zoneSize: Invalid value: "16": must be greater',
        ),
        (
            "rate",
            ((f"{RL}.zoneSize", "0m"),),
            f'{RL}.zoneSize: Invalid value: "0m": must be greater',
        ),
        ("rate", ((f"{RL}.key", ""),), f"{RL}.key: Required value"),
        (
            "rate",
            ((f"{RL}.key", "${host}"),),
            f"{RL}.key: Invalid value: \"host\": 'host' contains an invalid NGINX variable. "
            "Accepted variables are: args, binary_remote_addr, request_method, request_uri, uri",
        ),
        (
            "rate",
            ((f"{RL}.key", "${binary_remote_addr"),),
            f'{RL}.key: Invalid value: "${{binary_remote_addr": variables must be enclosed in '
            "curly braces, for example ${host}",
        ),
        (
            "rate",
            ((f"{RL}.key", "a;${uri}"),),
            f'{RL}.key: Invalid value: "a;${{uri}}": a key must not contain whitespace, control '
            "characters, quotes, '\\', '`', ';', '{' or '}' (ferryman): found ';'",
        ),
        (
            "rate",
            ((f"{RL}.rejectCode", 302),),
            f"{RL}.rejectCode: Invalid value: 302: must be within the range [400-599]",
        ),
        (
            "rate",
            ((f"{RL}.logLevel", "debug"),),
            f'{RL}.logLevel: Invalid value: "debug": Accepted values: info, notice, warn, error',
        ),
        ("rate", ((f"{RL}.burst", 0),), f"{RL}.burst: Invalid value: 0: must be positive"),
        (
            "rate",
            ((f"{RL}.condition", {"default": True}),),
            f"{RL}.condition: Required value: must specify either jwt or variable conditions",
        ),
        (
            "rate",
            ((f"{RL}.condition.jwt", {"claim": "sub", "match": "x"}),),
            f"{RL}.condition: Required value: only one condition, jwt or variables is allowed",
        ),
        (
            "rate",
            ((f"{RL}.condition.variables", [{"name": "$uri", "match": "x"}] * 2),),
            f"{RL}.condition.variables: Too many: 2: must have at most 1 items",
        ),
        (
            "jwt",
            ((f"{JWT}.realm", DELETE),),
            f"{JWT}.realm: Required value: realm field must be present",
        ),
        (
            "jwt",
            ((f"{JWT}.secret", DELETE),),
            f"{JWT}.secret: Required value: either Secret or JwksURI must be present",
        ),
        (
            "jwt",
            ((f"{JWT}.jwksURI", "https://idp/keys"),),
            f"{JWT}.secret: Forbidden: only either of Secret or JwksURI can be used",
        ),
        (
            "jwt",
            ((f"{JWT}.token", "$host"),),
            f'{JWT}.token: Invalid value: "$host": must only have special vars',
        ),
        (
            "jwt",
            ((f"{JWT}.token", "token"),),
            f'{JWT}.token: Invalid value: "token": must have 1 var',
        ),
        (
            "jwt",
            ((f"{JWT}.secret", DELETE), (f"{JWT}.jwksURI", "idp/keys"), (f"{JWT}.keyCache", "1h")),
            f'{JWT}.jwksURI: Invalid value: "idp/keys": scheme required, please use the prefix '
            "http(s)://",
        ),
        (
            "jwt",
            ((f"{JWT}.secret", DELETE), (f"{JWT}.jwksURI", "https://idp:8443/keys")),
            f"{JWT}.keyCache: Required value: key cache must be set, example value: 1h",
        ),
        (
            "jwt",
            (
                (f"{JWT}.secret", DELETE),
                (f"{JWT}.jwksURI", "https://idp/keys"),
                (f"{JWT}.keyCache", "1h"),
                (f"{JWT}.trustedCertSecret", "idp-ca"),
            ),
            f"{JWT}.sslVerify: Invalid value: false: sslVerify should be enabled when "
            "trustedCertSecret is specified",
        ),
        (
            "jwt",
            (
                (f"{JWT}.secret", DELETE),
                (f"{JWT}.jwksURI", "https://idp/keys"),
                (f"{JWT}.keyCache", "1h"),
            ),
            f"{JWT}.jwksURI: Forbidden: not supported by ferryman: keys fetched from a remote "
            "server; put the JWKS in a Secret of type nginx.org/jwk",
        ),
        (
            "jwt",
            ((f"{JWT}.keyCache", "1h"),),
            f"{JWT}.keyCache: Forbidden: key cache must not be used when using Secret",
        ),
        (
            "jwt",
            ((f"{JWT}.realm", "My $API"),),
            f'{JWT}.realm: Invalid value: "My $API": a valid realm must have all \'"\' escaped '
            "and must not contain any '$' or end with an unescaped '\\' (e.g. 'MyAPI',  or 'My "
            "Product API', regex used for validation is '([^\"$\\\\]|\\\\[^$])*')",
        ),
        ("basic", (("spec.basicAuth.secret", DELETE),), "spec.basicAuth.secret: Required value"),
        (
            "basic",
            (("spec.basicAuth.realm", "a\nb"),),
            'spec.basicAuth.realm: Invalid value: "a\\nb": must not contain control characters '
            "or line breaks (ferryman)",
        ),
        (
            "api-key",
            (("spec.apiKey.suppliedIn", DELETE),),
            "spec.apiKey.suppliedIn: Required value: suppliedIn cannot be nil",
        ),
        (
            "api-key",
            (("spec.apiKey.suppliedIn", {}),),
            "spec.apiKey.suppliedIn: Required value: at least one query or header name must be "
            "provided",
        ),
        (
            "api-key",
            (("spec.apiKey.suppliedIn.header[0]", "X Key"),),
            'spec.apiKey.suppliedIn.header: Invalid value: "X Key": a valid HTTP header must '
            "consist of alphanumeric characters or '-'",
        ),
        (
            "api-key",
            (("spec.apiKey.clientSecret", ""),),
            "spec.apiKey.clientSecret: Required value: clientSecret cannot be empty",
        ),
        (
            "ingress-mtls",
            (("spec.ingressMTLS.verifyClient", "maybe"),),
            "spec.ingressMTLS.verifyClient: Invalid value: \"maybe\": 'maybe' contains an invalid "
            "NGINX parameter. Accepted parameters are: on, off, optional, optional_no_ca",
        ),
        (
            "ingress-mtls",
            (("spec.ingressMTLS.clientCertSecret", DELETE),),
            "spec.ingressMTLS.clientCertSecret: Required value",
        ),
        (
            "ingress-mtls",
            (("spec.ingressMTLS.verifyDepth", -1),),
            "spec.ingressMTLS.verifyDepth: Invalid value: -1: must be positive",
        ),
        (
            "ingress-mtls",
            (("spec.ingressMTLS.crlFileName", "ca.crl"),),
            "spec.ingressMTLS.crlFileName: Forbidden: not supported by ferryman: a CRL file on "
            "the controller's disk",
        ),
        (
            "egress-mtls",
            (("spec.egressMTLS.trustedCertSecret", DELETE),),
            "spec.egressMTLS.trustedCertSecret: Required value: must be set when verifyServer is "
            "'true'",
        ),
        (
            "egress-mtls",
            (("spec.egressMTLS.protocols", "TLSv9"),),
            'spec.egressMTLS.protocols: Invalid value: "TLSv9": must be one of SSLv2, SSLv3, '
            "TLSv1, TLSv1.1, TLSv1.2, TLSv1.3 (ferryman)",
        ),
        (
            "egress-mtls",
            (("spec.egressMTLS.ciphers", "HIGH; evil"),),
            'spec.egressMTLS.ciphers: Invalid value: "HIGH; evil": must be an OpenSSL cipher list',
        ),
        (
            "cors",
            ((f"{CORS}.allowOrigin[0]", "*"),),
            f"{CORS}: Invalid value: \"\": cannot use wildcard '*' for allowOrigin when "
            "allowCredentials is true for security reasons",
        ),
        (
            "cors",
            ((f"{CORS}.allowOrigin[0]", "ftp://example.com"),),
            f'{CORS}.allowOrigin[0]: Invalid value: "ftp://example.com": origin must start with '
            "http:// or https:// (or be '*')",
        ),
        (
            "cors",
            ((f"{CORS}.allowOrigin[0]", "https://example.com/app"),),
            f'{CORS}.allowOrigin[0]: Invalid value: "https://example.com/app": origin must not '
            "include a path",
        ),
        (
            "cors",
            ((f"{CORS}.allowOrigin[0]", "https://*.*.example.com"),),
            f'{CORS}.allowOrigin[0]: Invalid value: "https://*.*.example.com": only single-level '
            "wildcard subdomains are supported (invalid: https://*.*.example.com)",
        ),
        (
            "cors",
            ((f"{CORS}.allowOrigin[1]", "https://example.com"),),
            f"{CORS}.allowOrigin[1]: Duplicate value: \"origin 'https://example.com' already "
            'specified at index 0, duplicates cause nginx configuration conflicts"',
        ),
        (
            "cors",
            ((f"{CORS}.allowMethods", ["GET", "HEAD"]),),
            f'{CORS}.allowMethods: Invalid value: ["GET", "HEAD"]: HEAD method should not be '
            "explicitly listed when GET is present",
        ),
        (
            "cors",
            ((f"{CORS}.allowMethods[0]", "TRACE"),),
            f'{CORS}.allowMethods[0]: Invalid value: "TRACE": allowed methods must be valid HTTP '
            "methods",
        ),
        (
            "cors",
            ((f"{CORS}.allowHeaders[0]", "Cookie"),),
            f'{CORS}.allowHeaders[0]: Invalid value: "Cookie": forbidden request header cannot '
            "be set by JavaScript",
        ),
        (
            "cors",
            ((f"{CORS}.exposeHeaders[0]", "Set-Cookie"),),
            f'{CORS}.exposeHeaders[0]: Invalid value: "Set-Cookie": forbidden response header '
            "cannot be exposed via CORS",
        ),
        (
            "cors",
            ((f"{CORS}.allowHeaders[0]", "X-*"),),
            f"{CORS}.allowHeaders[0]: Invalid value: \"X-*\": wildcard '*' may only be used as a "
            "standalone value",
        ),
        (
            "cors",
            ((f"{CORS}.allowOrigin[0]", "https://a.com;x"),),
            f'{CORS}.allowOrigin[0]: Invalid value: "https://a.com;x": origin contains dangerous '
            "characters that could cause nginx configuration injection",
        ),
        ("cors", ((f"{CORS}.allowOrigin", []),), f"{CORS}.allowOrigin: Required value"),
        ("cors", ((f"{CORS}.maxAge", -1),), f"{CORS}.maxAge: Invalid value: -1"),
        ("basic", (("spec.basicAuth.secrets", "x"),), "spec.basicAuth.secrets: Unknown field"),
    ],
)
def test_each_rule_with_nics_message(name: str, changes: tuple[Any, ...], expected: str) -> None:
    found = problems(name, *changes)
    assert any(p.startswith(expected) for p in found), found
