"""What NIC's Ingress examples asked of the annotations: NGINX Plus's
``nginx.com/*`` ones rejected as NIC rejects them on open-source NGINX,
``custom.nginx.org/*`` ones (custom templates) a Warning, ``limit-req-*``
(rate-limit), ``proxy-redirect-*`` (proxy-redirect) and
``sticky-cookie-services`` (session-persistence) applied, the ingressMTLS,
egressMTLS and externalAuth Policies enforced on Ingress, a minion's own
warnings on its Event, and v1beta1's serviceName named in a rejection."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferryman.configs.record_text import b64
from ferryman.configs.secret_state import SecretState
from ferryman.kinds.ingress.parse.annotations import validate
from ferryman.kinds.ingress.parse.ingress import parse_ingress
from ferryman.kinds.ingress.parse.sticky import (
    EXPIRES_MAX,
    StickyCookie,
    StickyError,
    parse_sticky_services,
)
from ferryman.kinds.ingress.records.hosts import Outcome, ingress_records
from ferryman.kinds.ingress.records.limit_req import LimitReq, limit_req, limit_req_policy
from ferryman.kinds.ingress.records.mergeable import minion_event
from ferryman.kinds.ingress.records.options import ingress_options
from ferryman.kinds.ingress.records.virtual_hosts import virtual_hosts
from ferryman.kinds.policy.records.rate import RateLimits
from ferryman.resources.meta import InvalidResource
from testkit.pki import authority, issue
from testkit.policy_objects import Objects, _policy, _secret


def _validate(annotations: dict[str, str]) -> tuple[list[str], list[str]]:
    _, problems, warnings = validate(annotations, frozenset(), hostless=False)
    return [str(p) for p in problems], warnings


def test_nginx_plus_annotations_are_forbidden() -> None:
    problems, _ = _validate(
        {
            "nginx.com/health-checks": "true",
            "nginx.com/jwt-key": "cafe-jwk",
            "nginx.com/sticky-cookie-services": "serviceName=tea-svc srv_id",
            "nginx.org/proxy-read-timeout": "10s",
        }
    )
    assert problems == [
        "annotations.nginx.com/health-checks: Forbidden: annotation requires NGINX Plus",
        "annotations.nginx.com/jwt-key: Forbidden: annotation requires NGINX Plus",
        "annotations.nginx.com/sticky-cookie-services: Forbidden: annotation requires NGINX Plus",
    ]


def test_custom_annotations_warn() -> None:
    problems, warnings = _validate({"custom.nginx.org/rate-limiting": "on"})
    assert problems == []
    assert warnings == [
        "annotation custom.nginx.org/rate-limiting: custom annotations take effect through "
        "NIC's custom templates, which ferryman does not have: ignored"
    ]


def test_limit_req_key_is_validated_as_nic_does() -> None:
    problems, _ = _validate({"nginx.org/limit-req-rate": "1r/s", "nginx.org/limit-req-key": "a;"})
    assert problems[0].startswith(
        'annotations.nginx.org/limit-req-key: Invalid value: "a;": must consist of one or more '
        "NGINX variable references"
    )
    assert _validate({"nginx.org/limit-req-key": "$http_x${uri}"}) == ([], [])


def test_the_rate_limit_examples_annotations() -> None:
    limit, warnings = limit_req(
        {
            "nginx.org/limit-req-rate": "1r/s",
            "nginx.org/limit-req-key": "${binary_remote_addr}",
            "nginx.org/limit-req-zone-size": "10M",
        }
    )
    assert limit == LimitReq(rate=1000)
    assert warnings == [
        "nginx.org/limit-req-zone-size: ferryman's limits share one zone (ferryman_limits); ignored"
    ]


def test_limit_req_values_defaults_and_bad_values() -> None:
    limit, warnings = limit_req(
        {
            "nginx.org/limit-req-rate": "30r/m",
            "nginx.org/limit-req-key": "$http_x_user$uri",
            "nginx.org/limit-req-burst": "5",
            "nginx.org/limit-req-delay": "2",
            "nginx.org/limit-req-dry-run": "true",
            "nginx.org/limit-req-log-level": "loud",
            "nginx.org/limit-req-reject-code": "200",
        }
    )
    assert limit == LimitReq(rate=500, key="${http_x_user}${uri}", burst=5, delay=2, dry_run=True)
    assert warnings == [
        "invalid value for nginx.org/limit-req-log-level: got loud: must be one of: info, "
        "notice, warn, error; ignored",
        "invalid value for nginx.org/limit-req-reject-code: got 200: must be an HTTP status "
        "code from 400 to 599; ignored",
    ]
    nodelay, _ = limit_req(
        {"nginx.org/limit-req-rate": "2r/s", "nginx.org/limit-req-no-delay": "1"}
    )
    assert nodelay == LimitReq(rate=2000, delay=-1)
    assert limit_req({"nginx.org/limit-req-rate": "0r/s"}) == (
        None,
        ["invalid value for nginx.org/limit-req-rate: got 0r/s: rate must be >0; ignored"],
    )
    assert limit_req({"nginx.org/limit-req-burst": "3"}) == (
        None,
        ["nginx.org/limit-req-burst: ignored without nginx.org/limit-req-rate (as NIC does)"],
    )


def test_the_limit_is_a_rate_limit_policy_of_the_ingress_zone() -> None:
    options, warnings = ingress_options({"nginx.org/limit-req-rate": "1r/s"}, {})
    assert warnings == [] and options.slow()
    attached = limit_req_policy("default", "cafe-ingress", options.limit_req)
    config = attached.configs[RateLimits]
    zone, key = b64("ingress/default/cafe-ingress"), b64("${binary_remote_addr}")
    assert config.item() == f"P|r|0|error|429|{zone}.1000.{key}.0.0...0"


def _cafe(name: str, annotations: dict[str, str], *, tls: bool, paths: bool = True) -> Any:
    rule: dict[str, Any] = {"host": "cafe.test"}
    if paths:
        backend = {"service": {"name": "app", "port": {"number": 80}}}
        rule["http"] = {"paths": [{"path": f"/{name}", "pathType": "Prefix", "backend": backend}]}
    spec: dict[str, Any] = {"rules": [rule]}
    if tls:
        spec["tls"] = [{"hosts": ["cafe.test"], "secretName": "s"}]
    md = {"name": name, "namespace": "ns", "annotations": annotations}
    return parse_ingress({"metadata": md, "spec": spec})


def _records(ing: Any, reads: Objects, mergeable: list[Any] | None = None) -> Outcome:
    hosts = [] if ing.mergeable == "minion" else ["cafe.test"]
    vhosts, _ = virtual_hosts(ing, hosts, {"s": SecretState("id", None)})
    return ingress_records(ing, vhosts, reads, "ferryman", {}, mergeable=mergeable)


def test_ingress_mtls_and_external_auth_policies_on_an_ingress() -> None:
    """ingressMTLS writes the host's M record (its client check); externalAuth's
    Service is among the record's backends (its endpoints are pushed)."""
    reads = Objects(
        _policy("mtls", ingressMTLS={"clientCertSecret": "ca"}),
        _policy("ext", externalAuth={"authURI": "/auth", "authServiceName": "auth"}),
        _secret("ca", "nginx.org/ca", {"ca.crt": authority("unit-ca").cert_pem}),
    )
    (written,) = _records(_cafe("a", {"nginx.org/policies": "mtls"}, tls=True), reads).written
    assert written.client_check is not None and written.client_check.startswith("on 1 ")
    (written,) = _records(_cafe("a", {"nginx.org/policies": "ext"}, tls=False), reads).written
    assert written.client_check is None
    assert written.backends == {"ns/app:80", "ns/auth:80"}
    # With another option the host is VirtualServer-style: the same M record.
    annotations = {"nginx.org/policies": "mtls", "nginx.org/proxy-read-timeout": "5s"}
    (written,) = _records(_cafe("a", annotations, tls=True), reads).written
    assert written.client_check is not None and written.routing is not None


def test_a_minions_own_warnings_reach_its_event() -> None:
    """The master's render applies a minion's options and policies; the minion's
    own render now says what of them is not applied (they were lost)."""
    master = _cafe("m", {"nginx.org/mergeable-ingress-type": "master"}, tls=True, paths=False)
    annotations = {
        "nginx.org/mergeable-ingress-type": "minion",
        "nginx.org/policies": "gone",
        "nginx.org/limit-req-rate": "1r/s",
        "nginx.org/limit-req-scale": "true",
    }
    minion = _cafe("tea", annotations, tls=False)
    out = _records(minion, Objects(), [master, minion])
    assert out.written == []
    assert out.warnings == [
        "nginx.org/limit-req-scale: not applied: ferryman does not know how many replicas "
        "share the traffic, so the rate is each replica's",
        "Policy ns/gone is missing or invalid",
    ]
    assert minion_event(minion, [master, minion], out.warnings)[1] == "AddedOrUpdatedWithWarning"
    assert _records(minion, Objects(), [minion]).warnings == []  # no master: NIC's own Event


def test_proxy_redirect_annotations_as_nic_validates_them() -> None:
    frm, to = "nginx.org/proxy-redirect-from", "nginx.org/proxy-redirect-to"
    assert _validate({frm: "http://a/v1/", to: "http://b/"}) == ([], [])
    assert _validate({frm: "off"}) == ([], [])
    assert _validate({frm: "a b", to: "c"})[0] == [
        'annotations.nginx.org/proxy-redirect-from: Invalid value: "a b": must not contain '
        "';', '{', '}', newline, carriage return, backtick, whitespace, or '#'"
    ]
    assert _validate({frm: "~^(a", to: "c"})[0] == [
        'annotations.nginx.org/proxy-redirect-from: Invalid value: "~^(a": invalid regex pattern: '
        "missing closing parenthesis at offset 3"
    ]
    assert _validate({to: "c"})[0] == [
        'annotations.nginx.org/proxy-redirect-to: Invalid value: "": nginx.org/proxy-redirect-to '
        "requires nginx.org/proxy-redirect-from to also be set"
    ]
    assert _validate({frm: "default", to: "c"})[0] == [
        'annotations.nginx.org/proxy-redirect-to: Invalid value: "": nginx.org/proxy-redirect-to '
        'cannot be set when nginx.org/proxy-redirect-from is "default"'
    ]
    assert _validate({frm: "http://a/"})[0] == [
        'annotations.nginx.org/proxy-redirect-from: Invalid value: "http://a/": '
        "nginx.org/proxy-redirect-from with a URL or regex value requires "
        "nginx.org/proxy-redirect-to to also be set"
    ]


def test_proxy_redirect_is_the_proxy_actions_tenth_field() -> None:
    annotations = {
        "nginx.org/proxy-redirect-from": "~*^http://a/(.*)",
        "nginx.org/proxy-redirect-to": "/$1",
    }
    (written,) = _records(_cafe("a", annotations, tls=False), Objects()).written
    assert written.routing is not None and written.fast is None  # the header filter's: Lua
    field = f"i~{b64('^http://a/(.*)')}~{b64('/$1')}"
    assert f"100:p.1........{field}|" in written.routing  # f3..f9 empty
    options, _ = ingress_options({"nginx.org/proxy-redirect-from": "off"}, {})
    assert options.proxy_redirect is None and not options.slow()


def test_egress_mtls_on_an_ingress_is_its_routes_client_certificate() -> None:
    pair = issue("unit-egress-ca", "client")
    reads = Objects(
        _policy("egress", egressMTLS={"tlsSecret": "client"}),
        _secret("client", "kubernetes.io/tls", {"tls.crt": pair.cert_pem, "tls.key": pair.key_pem}),
    )
    annotations = {"nginx.org/policies": "egress", "nginx.org/ssl-services": "app"}
    (written,) = _records(_cafe("a", annotations, tls=False), reads).written
    assert written.routing is not None
    assert f"P|e|{b64(pair.cert_pem)}|{b64(pair.key_pem)}|" in written.routing
    assert "U|ns/app:80|rr|1|10|-|-|-|0||1." in written.routing  # proxy_pass https://


def test_a_v1beta1_backend_is_named_in_the_rejection() -> None:
    """Some of NIC's READMEs (jwt, path-regex) still show serviceName/servicePort."""
    backend = {"serviceName": "tea-svc", "servicePort": 80}
    raw = {
        "metadata": {"name": "old", "namespace": "ns"},
        "spec": {
            "rules": [{"host": "a.test", "http": {"paths": [{"path": "/", "backend": backend}]}}]
        },
    }
    with pytest.raises(InvalidResource) as e:
        parse_ingress(raw)
    assert (
        "spec.rules[0].http.paths[0].pathType: must be one of Exact, Prefix, "
        "ImplementationSpecific; spec.rules[0].http.paths[0].backend.serviceName: v1beta1's "
        "field (removed in Kubernetes 1.22); networking.k8s.io/v1 takes service.name and "
        "service.port"
    ) in str(e.value)


def test_sticky_cookie_services_as_nic_and_nginx_read_them() -> None:
    cookies = parse_sticky_services(
        "serviceName=coffee-svc srv_id expires=1h path=/coffee;"
        "serviceName=tea-svc srv_id expires=max domain=.example.com httponly secure samesite=Lax"
    )
    assert cookies == {
        "coffee-svc": StickyCookie("srv_id", 3600, path="/coffee"),
        "tea-svc": StickyCookie(
            "srv_id", EXPIRES_MAX, ".example.com", httponly=True, secure=True, samesite="lax"
        ),
    }
    key = "nginx.org/sticky-cookie-services"
    for value, message in (
        ("tea-svc", "invalid sticky-cookie service format: tea-svc. Must be a semicolon-separated"),
        ("serviceName=a=b srv", "invalid sticky-cookie service format: [serviceName a b]"),
        ("serviceName=a srv expires=soon", "invalid sticky-cookie parameters: srv expires=soon"),
        ("serviceName=a srv path=/a;x", "invalid sticky-cookie service format: x"),
        ("serviceName=a srv colour=red", "invalid sticky-cookie parameters: srv colour=red"),
        ("serviceName=a srv httponly httponly", "invalid sticky-cookie parameters"),
    ):
        (problem,) = _validate({key: value})[0]
        assert problem.startswith(f'annotations.{key}: Invalid value: "{value}": {message}')


def test_the_sticky_cookie_is_its_services_upstream_field() -> None:
    annotations = {"nginx.org/sticky-cookie-services": "serviceName=app srv_id expires=2h secure"}
    (written,) = _records(_cafe("a", annotations, tls=False), Objects()).written
    assert written.routing is not None and written.fast is None  # the slow path's balancer
    want = f"|0.-.-.-.-|{b64('srv_id')}~7200~~~~s "
    assert want in written.routing


_WORDS = st.sampled_from(
    ["srv_id", "expires=1h", "expires=max", "path=/a", "domain=.x.com", "httponly", "secure"]
)
_STICKY = st.builds(
    lambda svc, words: f"serviceName={svc} " + " ".join(words),
    st.text(max_size=8),
    st.lists(
        st.one_of(_WORDS, st.text(max_size=8), _WORDS.map(lambda w: w + "\r\n;x")), max_size=6
    ),
)


@given(st.one_of(_STICKY, st.text(max_size=80)))
def test_sticky_parameters_never_put_separators_into_the_cookie(text: str) -> None:
    """Whatever the annotation says, a parsed cookie's strings carry no ';', ',',
    whitespace or control character into Set-Cookie (or StickyError)."""
    try:
        cookies = parse_sticky_services(text)
    except StickyError:
        return
    for cookie in cookies.values():
        for part in (cookie.name, cookie.domain, cookie.path, cookie.samesite):
            assert not any(c in part for c in ';,"\\') and part == "".join(part.split())
            assert part.isprintable()


@given(st.text(max_size=60), st.text(max_size=60))
def test_proxy_redirect_values_are_one_token(origin: str, replacement: str) -> None:
    _, problems, _ = validate(
        {"nginx.org/proxy-redirect-from": origin, "nginx.org/proxy-redirect-to": replacement},
        frozenset(),
        hostless=False,
    )
    if not problems:
        for value in (origin, replacement):
            assert value and not any(c in value for c in ";{}`#") and value.split() == [value]
