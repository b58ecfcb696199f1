"""ingress-nginx's annotations as nginx.org's (kinds/ingress/parse/ingress_nginx.py)."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferryman.kinds.ingress.parse import annotations as nginx_org
from ferryman.kinds.ingress.parse.ingress import parse_ingress
from ferryman.kinds.ingress.parse.ingress_nginx import (
    DIFFERS,
    ENTRIES,
    KNOWN_NOT_YET,
    NOT_YET,
    PREFIX,
    REFUSED,
    entry,
    translate,
)
from ferryman.resources.meta import InvalidResource

P = PREFIX
SPEC = {
    "rules": [
        {
            "host": "a.test",
            "http": {
                "paths": [
                    {
                        "path": "/",
                        "pathType": "Prefix",
                        "backend": {"service": {"name": "web", "port": {"number": 80}}},
                    },
                    {
                        "path": "/api",
                        "pathType": "Prefix",
                        "backend": {"service": {"name": "api", "port": {"number": 80}}},
                    },
                ]
            },
        }
    ]
}


def _nginx_org(annotations: dict[str, str]) -> dict[str, str]:
    t = translate(annotations, SPEC)
    return {k: v for k, v in t.annotations.items() if k.startswith("nginx.org/")}


@pytest.mark.parametrize(
    ("given_", "expected"),
    [
        ({"proxy-read-timeout": "120"}, {"proxy-read-timeout": "120s"}),
        ({"proxy-connect-timeout": "3"}, {"proxy-connect-timeout": "3s"}),
        ({"proxy-body-size": "8m"}, {"client-max-body-size": "8m"}),
        ({"proxy-buffering": "off"}, {"proxy-buffering": "false"}),
        (
            {"proxy-buffer-size": "16k"},
            {"proxy-buffer-size": "16k", "proxy-buffers": "4 16k"},
        ),
        ({"proxy-buffers-number": "8"}, {"proxy-buffers": "8 4k"}),
        ({"load-balance": "round_robin"}, {"lb-method": "round_robin"}),
        ({"upstream-hash-by": "$request_uri"}, {"lb-method": "hash $request_uri consistent"}),
        ({"service-upstream": "true"}, {"use-cluster-ip": "true"}),
        ({"ssl-redirect": "false"}, {"ssl-redirect": "false"}),
        ({"backend-protocol": "HTTPS"}, {"ssl-services": "api,web"}),
        ({"backend-protocol": "GRPCS"}, {"grpc-services": "api,web", "ssl-services": "api,web"}),
        ({"backend-protocol": "HTTP"}, {}),
        ({"upstream-vhost": "in.example"}, {"proxy-set-headers": "Host: in.example"}),
        (
            {"x-forwarded-prefix": "/app", "upstream-vhost": "in.example"},
            {"proxy-set-headers": "Host: in.example,X-Forwarded-Prefix: /app"},
        ),
        (
            {"limit-rps": "5"},
            {
                "limit-req-rate": "5r/s",
                "limit-req-burst": "25",
                "limit-req-no-delay": "true",
                "limit-req-reject-code": "503",
                "limit-req-key": "${binary_remote_addr}",
            },
        ),
        (
            {"limit-rpm": "60", "limit-burst-multiplier": "2"},
            {
                "limit-req-rate": "60r/m",
                "limit-req-burst": "120",
                "limit-req-no-delay": "true",
                "limit-req-reject-code": "503",
                "limit-req-key": "${binary_remote_addr}",
            },
        ),
        (
            {
                "affinity": "cookie",
                "session-cookie-name": "route",
                "session-cookie-max-age": "3600",
                "session-cookie-path": "/",
                "session-cookie-samesite": "Lax",
                "session-cookie-secure": "true",
            },
            {
                "sticky-cookie-services": (
                    "serviceName=api route expires=3600s path=/ samesite=lax secure httponly;"
                    "serviceName=web route expires=3600s path=/ samesite=lax secure httponly"
                )
            },
        ),
    ],
)
def test_translated(given_: dict[str, str], expected: dict[str, str]) -> None:
    t = translate({P + k: v for k, v in given_.items()}, SPEC)
    assert _nginx_org({P + k: v for k, v in given_.items()}) == {
        "nginx.org/" + k: v for k, v in expected.items()
    }
    assert t.problems == []


def test_a_set_nginx_org_annotation_wins_with_a_warning() -> None:
    t = translate({P + "proxy-body-size": "8m", "nginx.org/client-max-body-size": "1m"}, SPEC)
    assert t.annotations["nginx.org/client-max-body-size"] == "1m"
    assert t.warnings == [
        f"annotation {P}proxy-body-size is not applied: nginx.org/client-max-body-size is set "
        "and wins"
    ]


def test_a_header_set_both_ways_keeps_nginx_orgs() -> None:
    t = translate(
        {P + "upstream-vhost": "x.example", "nginx.org/proxy-set-headers": "Host: y.example"}, SPEC
    )
    assert t.annotations["nginx.org/proxy-set-headers"] == "Host: y.example"
    assert "sets that header" in t.warnings[0]
    t = translate(
        {P + "upstream-vhost": "x.example", "nginx.org/proxy-set-headers": "X-A: 1"}, SPEC
    )
    assert t.annotations["nginx.org/proxy-set-headers"] == "X-A: 1,Host: x.example"
    assert t.warnings == []


@pytest.mark.parametrize(
    ("key", "value", "why"),
    [
        ("proxy-read-timeout", "60s", "must be a whole number of seconds"),
        ("proxy-buffering", "yes", 'must be "on" or "off"'),
        ("load-balance", "random", "must be"),
        ("backend-protocol", "FCGI", "not AUTO_HTTP or FCGI"),
        ("upstream-vhost", 'a"b', "without control characters"),
        ("proxy-next-upstream", "error sometimes", "space-separated list"),
        ("affinity", "ip", 'ferryman serves "cookie"'),
    ],
)
def test_a_value_ingress_nginx_would_not_take_is_not_applied(
    key: str, value: str, why: str
) -> None:
    t = translate({P + key: value}, SPEC)
    assert not [k for k in t.annotations if k.startswith("nginx.org/")]
    assert len(t.warnings) == 1 and why in t.warnings[0] and "not applied" in t.warnings[0]
    assert t.problems == []


def test_ewma_is_least_conn_said_in_a_warning() -> None:
    t = translate({P + "load-balance": "ewma"}, SPEC)
    assert t.annotations["nginx.org/lb-method"] == "least_conn"
    assert t.warnings == [f"annotation {P}load-balance: ewma is served as least_conn"]


def test_snippets_reject_the_ingress_naming_the_replacement() -> None:
    obj = {
        "metadata": {
            "name": "s",
            "namespace": "default",
            "annotations": {P + "configuration-snippet": 'more_set_headers "X: 1";'},
        },
        "spec": SPEC,
    }
    with pytest.raises(InvalidResource) as e:
        parse_ingress(obj)
    (error,) = e.value.errors
    assert error.startswith(f"annotations.{P}configuration-snippet: refused: NGINX text")
    assert "nginx.org/proxy-set-headers" in error


def test_unknown_and_not_yet_annotations_warn_and_the_ingress_is_served() -> None:
    obj = {
        "metadata": {
            "name": "s",
            "namespace": "default",
            "annotations": {
                P + "proxy-conect-timeout": "3",
                P + "mirror-target": "http://m",
                P + "proxy-read-timeout": "9",
            },
        },
        "spec": SPEC,
    }
    ing = parse_ingress(obj)
    assert ing.meta.annotations["nginx.org/proxy-read-timeout"] == "9s"
    assert ing.warnings == (
        f"annotation {P}mirror-target is not applied by ferryman yet: ignored",
        f"annotation {P}proxy-conect-timeout is not an ingress-nginx annotation (misspelt?): "
        "ignored",
    )


def test_every_entry_has_a_status_and_the_vocabulary_is_ingress_nginxs() -> None:
    for key, e in ENTRIES.items():
        assert e.status in ("served", "differs", "refused", "not yet"), key
        assert e.note, key
    assert not KNOWN_NOT_YET & ENTRIES.keys()
    assert entry("snippet") is None
    assert entry("mirror-target").status == NOT_YET  # type: ignore[union-attr]
    assert entry("canary-weight").status == DIFFERS  # type: ignore[union-attr]
    assert entry("server-snippet").status == REFUSED  # type: ignore[union-attr]
    # ingress-nginx v1.15.1's documentation and parsers name 138.
    assert len(ENTRIES.keys() | KNOWN_NOT_YET) == 138


_keys = st.sampled_from(sorted(ENTRIES.keys() | KNOWN_NOT_YET))
_values = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)


@given(st.dictionaries(_keys, _values, max_size=8))
def test_anything_translated_passes_nics_validation(given_: dict[str, str]) -> None:
    """Whatever ingress-nginx values a user wrote, the nginx.org annotations they
    become are valid: a translation never rejects the Ingress by itself."""
    t = translate({P + k: v for k, v in given_.items()}, SPEC)
    produced = {k: v for k, v in t.annotations.items() if k.startswith("nginx.org/")}
    _, problems, _ = nginx_org.validate(produced, frozenset({"web", "api"}), hostless=False)
    assert problems == []


def _ing(annotations: dict[str, str]) -> object:
    return parse_ingress(
        {
            "metadata": {"name": "s", "namespace": "default", "annotations": annotations},
            "spec": SPEC,
        }
    )


def test_source_ranges_become_one_access_list_deny_first() -> None:
    from ferryman.kinds.policy.parse.policy import AccessControl

    t = translate(
        {
            P + "whitelist-source-range": "10.0.0.0/8, 192.0.2.1",
            P + "denylist-source-range": "10.1.0.0/16,10.0.0.0/8/",
        },
        SPEC,
    )
    assert t.problems == [
        f"annotations.{P}denylist-source-range: '10.0.0.0/8/' is not an address or CIDR "
        "block: refused, so as not to serve more openly"
    ]
    t = translate(
        {
            P + "whitelist-source-range": "10.0.0.0/8,192.0.2.1",
            P + "denylist-source-range": "10.1.0.0/16",
        },
        SPEC,
    )
    (allowed,) = t.policies
    assert isinstance(allowed, AccessControl) and allowed.action == "allow"
    assert "10.1.0.0/16" not in allowed.networks and "192.0.2.1/32" in allowed.networks
    assert "10.0.0.0/16" in allowed.networks and "10.128.0.0/9" in allowed.networks
    (denied,) = translate({P + "denylist-source-range": "::1"}, SPEC).policies
    assert denied == AccessControl("deny", ("::1/128",))


_v4 = st.builds(
    lambda a, p: ipaddress.ip_network((a, p), strict=False),
    st.integers(0, 2**32 - 1),
    st.integers(4, 32),
)


@given(st.lists(_v4, min_size=1, max_size=4), st.lists(_v4, max_size=4), st.integers(0, 2**32 - 1))
def test_the_access_list_lets_in_exactly_what_deny_then_allow_does(
    allowed: list[ipaddress.IPv4Network], denied: list[ipaddress.IPv4Network], address: int
) -> None:
    """Against NGINX's reading of ``deny D...; allow A...; deny all``, at an
    address inside one of the networks (where the answer can differ)."""
    a = {P + "whitelist-source-range": ",".join(map(str, allowed))}
    if denied:
        a[P + "denylist-source-range"] = ",".join(map(str, denied))
    probes = [ipaddress.ip_address(address)] + [n.network_address for n in allowed + denied]
    t = translate(a, SPEC)
    for ip in probes:
        expected = not any(ip in d for d in denied) and any(ip in n for n in allowed)
        if t.problems:  # nothing left to allow: no probe may be let in
            assert not expected, ip
            continue
        (acl,) = t.policies
        got = any(ip in ipaddress.ip_network(n) for n in acl.networks)  # type: ignore[union-attr]
        assert got == expected, ip


def test_cors_with_ingress_nginx_defaults_and_invalid_values_named() -> None:
    from ferryman.kinds.policy.parse.cors import CORS

    t = translate({P + "enable-cors": "true", P + "cors-max-age": "soon"}, SPEC)
    (c,) = t.policies
    assert c == CORS(
        ("*",),
        ("GET", "PUT", "POST", "DELETE", "PATCH", "OPTIONS"),
        (
            "DNT",
            "Keep-Alive",
            "User-Agent",
            "X-Requested-With",
            "If-Modified-Since",
            "Cache-Control",
            "Content-Type",
            "Range",
            "Authorization",
        ),
        True,
        (),
        1728000,
    )
    assert t.warnings == [
        f"annotation {P}cors-max-age: 'soon' is invalid: ingress-nginx's default (1728000) is used"
    ]
    assert translate({P + "enable-cors": "false"}, SPEC).policies == []


@pytest.mark.parametrize(
    ("given_", "error"),
    [
        ({"auth-type": "digest", "auth-secret": "s"}, 'ferryman serves "basic"'),
        ({"auth-type": "basic"}, "needs nginx.ingress.kubernetes.io/auth-secret"),
        ({"auth-type": "basic", "auth-secret": "other/s"}, "in the Ingress's namespace only"),
        ({"auth-type": "basic", "auth-secret": "s", "auth-secret-type": "auth-map"}, "auth-map"),
    ],
)
def test_basic_auth_that_cannot_be_enforced_rejects_the_ingress(
    given_: dict[str, str], error: str
) -> None:
    t = translate({P + k: v for k, v in given_.items()}, SPEC)
    assert len(t.problems) == 1 and error in t.problems[0]


def test_basic_auth_as_nics() -> None:
    assert _nginx_org(
        {P + "auth-type": "basic", P + "auth-secret": "users", P + "auth-realm": "Hi"}
    ) == {
        "nginx.org/basic-auth-secret": "users",
        "nginx.org/basic-auth-realm": "Hi",
    }


def test_proxy_ssl_as_egress_tls() -> None:
    from ferryman.kinds.policy.parse.policy import EgressMTLS

    a = {
        P + "proxy-ssl-secret": "shop/client",
        P + "proxy-ssl-name": "app.internal",
        P + "proxy-ssl-server-name": "on",
        P + "proxy-ssl-protocols": "TLSv1.2 TLSv1.3",
    }
    (egress,) = translate(a, SPEC, "shop").policies
    assert egress == EgressMTLS(
        tls_secret="client",
        protocols=("TLSv1.2", "TLSv1.3"),
        server_name=True,
        ssl_name="app.internal",
    )
    other = translate(a, SPEC, "web")
    assert other.policies == []
    assert "reads the Secret in the Ingress's namespace only" in other.problems[0]
    verify = translate(
        {**a, P + "proxy-ssl-verify": "on", P + "proxy-ssl-verify-depth": "2"}, SPEC, "shop"
    )
    assert (verify.problems, verify.warnings) == ([], [])
    assert verify.policies == [
        EgressMTLS(
            tls_secret="client",
            verify_server=True,
            verify_depth=2,
            protocols=("TLSv1.2", "TLSv1.3"),
            server_name=True,
            ssl_name="app.internal",
            trusted_in_tls_secret=True,
        )
    ]
    # ingress-nginx's default depth for 0; off is no verification.
    (zero,) = translate(
        {**a, P + "proxy-ssl-verify": "on", P + "proxy-ssl-verify-depth": "0"}, SPEC, "shop"
    ).policies
    assert isinstance(zero, EgressMTLS) and zero.verify_depth == 1
    (off,) = translate({**a, P + "proxy-ssl-verify": "off"}, SPEC, "shop").policies
    assert isinstance(off, EgressMTLS) and not off.verify_server and not off.trusted_in_tls_secret
    # A value ingress-nginx does not take is its default, off, said.
    odd = translate({**a, P + "proxy-ssl-verify": "true"}, SPEC, "shop")
    assert "'true' is not on or off: off" in odd.warnings[0]
    # Verifying needs the Secret's CAs and a name to check (else every request 502s).
    alone = translate({P + "proxy-ssl-verify": "on"}, SPEC, "shop")
    assert alone.policies == [] and "on needs nginx.ingress" in alone.problems[0]
    nameless = translate(
        {P + "proxy-ssl-secret": "client", P + "proxy-ssl-verify": "on"}, SPEC, "shop"
    )
    assert "without nginx.ingress.kubernetes.io/proxy-ssl-name" in nameless.warnings[0]
    deep = translate({**a, P + "proxy-ssl-verify-depth": "two"}, SPEC, "shop")
    assert "'two' is not a whole number" in deep.problems[0]
    bad = translate({P + "proxy-ssl-name": "a b"}, SPEC, "shop")
    assert "is not a host name" in bad.problems[0]
    bad = translate({P + "proxy-ssl-protocols": "TLSv1.2 TLSv9"}, SPEC, "shop")
    assert "'TLSv9' is not a TLS protocol" in bad.problems[0]
    bad = translate({P + "proxy-ssl-ciphers": "HIGH; evil"}, SPEC, "shop")
    assert "is not an OpenSSL cipher list" in bad.problems[0]


@pytest.mark.parametrize(
    ("url", "service", "namespace", "port", "uri", "ssl"),
    [
        (
            "http://oauth2-proxy.auth.svc.cluster.local:4180/oauth2/auth",
            "oauth2-proxy",
            "auth",
            4180,
            "/oauth2/auth",
            False,
        ),
        (
            "http://oauth2-proxy.auth.svc:4180/oauth2/auth",
            "oauth2-proxy",
            "auth",
            4180,
            "/oauth2/auth",
            False,
        ),
        ("http://oauth2-proxy.auth/oauth2/auth", "oauth2-proxy", "auth", 80, "/oauth2/auth", False),
        (
            "https://authz/check?allowed_groups=a,b",
            "authz",
            "",
            443,
            "/check?allowed_groups=a,b",
            True,
        ),
        ("http://authz", "authz", "", 80, "/", False),
    ],
)
def test_auth_url_naming_a_service_is_external_auth(
    url: str, service: str, namespace: str, port: int, uri: str, ssl: bool
) -> None:
    from ferryman.kinds.policy.parse.external_auth import ExternalAuth

    t = translate({P + "auth-url": url}, SPEC)
    assert not t.problems and not t.warnings
    (auth,) = t.policies
    assert auth == ExternalAuth(
        auth_uri=uri,
        service=service,
        service_namespace=namespace,
        ports=(port,),
        ssl_enabled=ssl,
        # ingress-nginx's defaults: the request's URI, Set-Cookie on success.
        request_redirect="${request_uri}",
        set_cookie="success",
        # Its auth location's Host: the URL's host as written.
        host_header=url.split("://")[1].split("/")[0].split(":")[0],
    )


def test_auth_signin_response_headers_and_method() -> None:
    t = translate(
        {
            P + "auth-url": "http://oauth2-proxy:4180/oauth2/auth",
            P + "auth-signin": "https://$host/oauth2/start?rd=$escaped_request_uri",
            P + "auth-response-headers": "X-Auth-Request-User, X-Auth-Request-Email",
            P + "auth-method": "get",
        },
        SPEC,
    )
    assert not t.problems
    (auth,) = t.policies
    assert auth.signin_url == "https://${host}/oauth2/start?rd=${escaped_request_uri}"  # type: ignore[union-attr]
    assert auth.redirect_param == "-"  # type: ignore[union-attr]
    assert auth.response_headers == ("X-Auth-Request-User", "X-Auth-Request-Email")  # type: ignore[union-attr]
    t = translate(
        {
            P + "auth-url": "http://oauth2-proxy:4180/oauth2/auth",
            P + "auth-signin": "https://login.example/start",
            P + "auth-signin-redirect-param": "orig",
        },
        SPEC,
    )
    (auth,) = t.policies
    assert auth.redirect_param == "orig"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("given_", "error"),
    [
        ({"auth-url": "https://auth.example.com/check"}, "is not a Service of the cluster"),
        ({"auth-url": "http://auth/check?u=$request_uri"}, "no NGINX variables"),
        ({"auth-url": "auth/check"}, "must be http(s)://"),
        ({"auth-url": "http://a/b", "auth-method": "POST"}, "GET only"),
        ({"auth-url": "http://a/b", "auth-signin": "https://$remote_user/x"}, "not one of"),
        ({"auth-url": "http://a/b", "auth-response-headers": "X-A;B"}, "not a header name"),
        ({"auth-signin": "https://login/"}, "needs nginx.ingress.kubernetes.io/auth-url"),
    ],
)
def test_auth_url_that_cannot_be_enforced_rejects_the_ingress(
    given_: dict[str, str], error: str
) -> None:
    t = translate({P + k: v for k, v in given_.items()}, SPEC)
    assert len(t.problems) == 1 and error in t.problems[0], t.problems
    assert not t.policies


def test_auth_tls_as_ingress_mtls() -> None:
    from ferryman.kinds.policy.parse.policy import IngressMTLS

    a = {
        P + "auth-tls-secret": "shop/client-ca",
        P + "auth-tls-verify-client": "optional_no_ca",
        P + "auth-tls-verify-depth": "2",
    }
    t = translate(a, SPEC, "shop")
    assert not t.problems
    assert t.policies == [IngressMTLS("client-ca", "optional_no_ca", 2)]
    assert translate({P + "auth-tls-secret": "ca"}, SPEC, "shop").policies == [
        IngressMTLS("ca", "on", 1)
    ]


@pytest.mark.parametrize(
    ("given_", "error"),
    [
        ({"auth-tls-secret": "other/ca"}, "in the Ingress's namespace only"),
        ({"auth-tls-secret": "ca", "auth-tls-verify-client": "maybe"}, "must be one of"),
        ({"auth-tls-secret": "ca", "auth-tls-verify-depth": "x"}, "not a whole number"),
        ({"auth-tls-verify-client": "on"}, "needs nginx.ingress.kubernetes.io/auth-tls-secret"),
        ({"auth-tls-secret": "Bad_Name"}, "not a Secret name"),
        ({"auth-tls-secret": "ca", "auth-tls-match-cn": "CN=x"}, "not implemented"),
        ({"auth-tls-secret": "ca", "auth-tls-pass-certificate-to-upstream": "true"}, "not impl"),
    ],
)
def test_auth_tls_that_cannot_be_enforced_rejects_the_ingress(
    given_: dict[str, str], error: str
) -> None:
    t = translate({P + k: v for k, v in given_.items()}, SPEC, "shop")
    assert len(t.problems) == 1 and error in t.problems[0], t.problems
    assert not t.policies
