"""ingress-nginx's source-range lists on the module's path: an Ingress whose
only annotation beyond the fast path's is ``whitelist-source-range`` /
``denylist-source-range`` gets an F record whose routes carry the list (the
``a`` kind, ngx_http_ferryman_access.c), with no ``g`` item: the requests no
path takes stay the slow path's, as before."""

from __future__ import annotations

import base64

from ferryman.kinds.ingress.parse.ingress import parse_ingress
from ferryman.kinds.ingress.records.hosts import ingress_records
from ferryman.kinds.ingress.records.virtual_hosts import virtual_hosts
from ferryman.wire.push import record_problem
from testkit.harness import ingress, path, rule
from testkit.vs_fast import locations

P = "nginx.ingress.kubernetes.io/"


def _fast(annotations: dict[str, str]) -> str | None:
    obj = ingress(
        "a",
        [rule("b.test", path("/", "s"), path("/x", "s"))],
        annotations={P + k: v for k, v in annotations.items()},
        namespace="shop",
    )
    ing = parse_ingress(obj)
    vhosts, _ = virtual_hosts(ing, ["b.test"], {})
    out = ingress_records(ing, vhosts, None, "ferryman", {})  # type: ignore[arg-type]
    (written,) = out.written
    fast: str | None = written.fast
    assert fast is None or record_problem(("F", "b.test"), fast) is None
    return fast


def test_an_allow_list_is_checked_by_the_module() -> None:
    fast = _fast({"whitelist-source-range": "10.0.0.0/8, 192.0.2.1"})
    # "/", and "/x" as ingress-nginx's "= /x" and "/x/".
    assert locations(fast) == ["a", "a", "a"]
    assert fast is not None
    assert f"l E {base64.b64encode(b'/x').decode()} 0 a 1 2 4.0a000000.8 4.c0000201.32 f " in fast
    assert " g " not in fast


def test_a_deny_list_and_both_lists() -> None:
    fast = _fast({"denylist-source-range": "::1"})
    assert fast is not None and f" a 0 1 6.{'0' * 31}1.128 f " in fast
    # Both: the allowed networks less the denied ones, then "deny all".
    fast = _fast({"allowlist-source-range": "10.0.0.0/8", "denylist-source-range": "10.0.0.0/9"})
    assert fast is not None and " a 1 1 4.0a800000.9 f " in fast


def test_a_list_beside_an_option_the_module_lacks_stays_slow() -> None:
    assert _fast({"whitelist-source-range": "10.0.0.0/8", "limit-rps": "5"}) is None
    assert _fast({"whitelist-source-range": "10.0.0.0/8", "enable-cors": "true"}) is None
