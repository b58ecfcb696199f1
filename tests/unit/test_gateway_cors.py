"""An HTTPRoute's CORS filter: the CRD's validation in manifests mode
(kinds/gateway/parse/cors.py) and the origins' one regular expression the data
plane matches (kinds/gateway/records/routes.py)."""

from __future__ import annotations

import re
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ferryman.kinds.gateway.parse.cors import Cors
from ferryman.kinds.gateway.parse.gateway_api import parse_http_route
from ferryman.kinds.gateway.records.routes import origin_regex


def _parse(cors: Any) -> Any:
    return parse_http_route(
        {
            "metadata": {"name": "r", "namespace": "default"},
            "spec": {
                "parentRefs": [{"name": "gw"}],
                "rules": [{"filters": [{"type": "CORS", "cors": cors}]}],
            },
        }
    )


def test_a_valid_filter_is_read_with_the_crds_default_max_age() -> None:
    parsed = _parse({"allowOrigins": ["https://*.bar.com", "http://a.b:8080"],
                     "allowMethods": ["GET"], "allowCredentials": True})  # fmt: skip
    assert parsed.resource is not None, parsed.message()
    (f,) = parsed.resource.rules[0].filters
    assert f.cors == Cors(
        allow_origins=("https://*.bar.com", "http://a.b:8080"),
        allow_credentials=True,
        allow_methods=("GET",),
        max_age=5,
    )


def test_what_the_crd_refuses_is_refused_naming_the_field() -> None:
    cases = {
        "ftp://a.example": "spec.rules[0].filters[0].cors.allowOrigins[0]",
        "https://a.*.example": "spec.rules[0].filters[0].cors.allowOrigins[0]",
        "https://a.example/path": "spec.rules[0].filters[0].cors.allowOrigins[0]",
    }
    for origin, where in cases.items():
        parsed = _parse({"allowOrigins": [origin]})
        assert parsed.resource is None and where in parsed.message(), origin
    parsed = _parse({"allowOrigins": ["*", "https://a.example"]})
    assert "AllowOrigins cannot contain '*' alongside other" in parsed.message()
    parsed = _parse({"allowMethods": ["FETCH"]})
    assert "cors.allowMethods[0]" in parsed.message()
    parsed = _parse({"allowHeaders": ["x a"]})
    assert "cors.allowHeaders[0]" in parsed.message()
    parsed = _parse({"maxAge": 0})
    assert "cors.maxAge" in parsed.message()
    parsed = _parse(None)
    assert "filter.cors must be specified for CORS filter.type" in parsed.message()


def test_origins_match_scheme_host_and_port_exactly_but_for_wildcard_labels() -> None:
    regex = origin_regex(("https://www.foo.com", "https://*.bar.com", "http://*:8080"))
    assert regex is not None

    def ok(origin: str) -> bool:
        return re.fullmatch(regex, origin.lower()) is not None

    assert ok("https://www.foo.com") and ok("HTTPS://WWW.FOO.COM")
    assert ok("https://x.bar.com") and ok("https://a.b.c.bar.com")
    assert ok("http://anything.example:8080")
    assert not ok("https://bar.com") and not ok("https://xbar.com")
    assert not ok("http://www.foo.com") and not ok("https://www.foo.com:443")
    assert not ok("http://anything.example") and not ok("https://www.foo.com.evil")
    assert origin_regex(("*",)) is None


_label = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?", fullmatch=True)


@given(
    labels=st.lists(_label, min_size=1, max_size=4), tail=st.lists(_label, min_size=1, max_size=3)
)
def test_a_wildcard_label_covers_one_or_more_labels_and_nothing_else(labels, tail) -> None:
    suffix = ".".join(tail)
    regex = origin_regex((f"https://*.{suffix}",))
    assert regex is not None
    assert re.fullmatch(regex, f"https://{'.'.join(labels)}.{suffix}")
    assert not re.fullmatch(regex, f"https://{suffix}")
    assert not re.fullmatch(regex, f"https://{'.'.join(labels)}.{suffix}:1")
    assert not re.fullmatch(regex, f"https://{'.'.join(labels)}-{suffix}")
