"""ingress-nginx's default-backend and custom-http-errors annotations:
parse/ingress_nginx_backend.py and their backend and codes in the Ingress's
records (records/hosts.py, as_virtualserver.py)."""

from __future__ import annotations

import base64
import re
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ferryman.kinds.ingress.parse.ingress import parse_ingress
from ferryman.kinds.ingress.parse.ingress_nginx_backend import (
    MAX_CODES,
    error_codes,
    fallback_service,
)
from ferryman.kinds.ingress.records.hosts import ingress_records
from ferryman.kinds.ingress.records.virtual_hosts import virtual_hosts
from ferryman.resources.service import Service, ServicePort
from testkit.harness import ingress, path, rule

P = "nginx.ingress.kubernetes.io/"


def _read(value: str) -> tuple[str | None, list[str]]:
    warnings: list[str] = []
    return fallback_service({P + "default-backend": value}, warnings), warnings


def test_a_service_of_the_namespace() -> None:
    assert _read(" errors ") == ("errors", [])
    assert fallback_service({}, []) is None
    assert _read("shop/errors") == (
        None,
        [
            f"annotation {P}default-backend: 'shop/errors': ferryman reads a Service of the "
            "Ingress's namespace (name it without a namespace): not applied"
        ],
    )
    assert _read("Errors!") == (
        None,
        [f"annotation {P}default-backend: 'Errors!' is not a Service name: not applied"],
    )


@given(st.text(max_size=70))
def test_any_value_is_a_service_name_or_a_warning(value: str) -> None:
    name, warnings = _read(value)
    if name is None:
        assert len(warnings) == 1 and repr(value) in warnings[0]
    else:
        assert warnings == []
        assert re.fullmatch(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?", name)


def test_the_first_port_serves() -> None:
    s = Service("ns", "errors", (ServicePort("http", 8080), ServicePort("other", 81)))
    assert s.find_port("") == ServicePort("http", 8080)
    assert s.find_port("other") == ServicePort("other", 81)
    assert Service("ns", "none", ()).find_port("") is None


def _written(annotations: dict[str, str]) -> Any:
    ing = parse_ingress(
        ingress("a", [rule("b.test", path("/", "s"))], annotations=annotations, namespace="shop")
    )
    vhosts, _ = virtual_hosts(ing, ["b.test"], {})
    return ingress_records(ing, vhosts, None, "ferryman", {})  # type: ignore[arg-type]


def test_the_upstream_names_the_fallback_and_its_endpoints_are_pushed() -> None:
    out = _written({P + "default-backend": "errors"})
    (written,) = out.written
    assert out.warnings == []
    (upstream,) = [i.split("|") for i in written.routing.split(" ") if i.startswith("U|")]
    assert upstream[1] == "shop/s:80"
    assert upstream[10].split(".")[5] == base64.b64encode(b"shop/errors:").decode()
    assert written.backends == frozenset({"shop/s:80", "shop/errors:"})
    assert written.fast is None  # the Lua slow path's: the C module answers 503
    (plain,) = _written({}).written
    assert plain.routing is None


def test_the_upstream_lists_the_codes_and_the_ingress() -> None:
    out = _written({P + "default-backend": "errors", P + "custom-http-errors": "503,404,503"})
    (written,) = out.written
    assert out.warnings == []
    (upstream,) = [i.split("|") for i in written.routing.split(" ") if i.startswith("U|")]
    assert upstream[10].split(".")[6:] == ["404,503", base64.b64encode(b"a").decode()]
    # Without default-backend: not applied, and said.
    ing = parse_ingress(
        ingress(
            "a", [rule("b.test", path("/", "s"))], annotations={P + "custom-http-errors": "404"}
        )
    )
    assert ing.warnings == (
        f"annotation {P}custom-http-errors is not applied: it needs {P}default-backend "
        "(ferryman has no controller-wide default backend to send the errors to)",
    )


@given(st.text(max_size=40))
def test_any_codes_are_a_list_the_module_takes_or_a_warning(value: str) -> None:
    """What the parser passes, ngx_http_ferryman_errors.c takes: 1-32 distinct
    three-digit codes 400-599, ","-joined; anything else is a Warning."""
    warnings: list[str] = []
    codes = error_codes({P + "custom-http-errors": value}, "errors", warnings)
    if codes:
        assert warnings == []
        assert 1 <= len(codes) <= MAX_CODES and list(codes) == sorted(set(codes))
        assert all(400 <= c <= 599 for c in codes)
        assert re.fullmatch(r"[45]\d\d(,[45]\d\d)*", ",".join(map(str, codes)))
    else:
        assert len(warnings) == 1 and repr(value) in warnings[0]


def test_more_codes_than_the_module_takes_are_a_warning() -> None:
    warnings: list[str] = []
    many = ",".join(str(c) for c in range(400, 400 + MAX_CODES + 1))
    assert error_codes({P + "custom-http-errors": many}, "errors", warnings) == ()
    assert warnings[0].endswith(f"more than {MAX_CODES} codes: not applied")
    assert error_codes({P + "custom-http-errors": "599, 400"}, "errors", []) == (400, 599)
