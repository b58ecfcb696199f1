"""What NIC's Ingress examples asked of the annotations: NGINX Plus's
``nginx.com/*`` ones rejected as NIC rejects them on open-source NGINX,
``custom.nginx.org/*`` ones (custom templates) a Warning, and the
``limit-req-*`` rate limit (ingress-resources/rate-limit) applied."""

from __future__ import annotations

from ferryman.configs.ingress_limit_req import LimitReq, limit_req, limit_req_policy
from ferryman.configs.ingress_options import ingress_options
from ferryman.configs.policy_base import b64
from ferryman.configs.policy_rate import RateLimits
from ferryman.resources.ingress_annotations import validate


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
