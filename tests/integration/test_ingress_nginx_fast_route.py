"""Issue 30's route on the module's path, on every server: ingress-nginx's
``rewrite-target`` with capture groups on a ``use-regex`` path, a canary by
header (``always``/``never``, ``-value``, ``-pattern``) and a
``whitelist-source-range`` on one route are served by ngx_http_ferryman_module
(the F record's ``r`` rewrite and canary matches), with the answers the slow
path gave: the backend sees the rewritten URI with the query string, the
canary takes what its header asks, a client outside the list gets 403. Which
path answered is ferryman_fast_path_requests_total's (testkit/fast_path.py):
before this change the slow path served all of it. Changes are records only:
no reload."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from testkit.annotated_ingress import HOST, annotated, start
from testkit.harness import (
    Backends,
    Ferryman,
    eventually,
    fast_path_counts,
    ingress,
    path,
    rule,
    service_with_backends,
)

pytestmark = pytest.mark.flavours("nginx", "nginx-1.30", "angie")

P = "nginx.ingress.kubernetes.io/"
REGEX = "/p0(/|$)(.*)"


def _main(allow: str = "127.0.0.0/8") -> dict[str, Any]:
    return annotated(
        {
            P + "use-regex": "true",
            P + "rewrite-target": "/r/$2",
            P + "whitelist-source-range": allow,
        },
        path(REGEX, "app", path_type="ImplementationSpecific"),
    )


def _canary(**annotations: str) -> dict[str, Any]:
    return ingress(
        "canary",
        [rule(HOST, path(REGEX, "canary-svc", path_type="ImplementationSpecific"))],
        annotations={P + "canary": "true", **{P + k: v for k, v in annotations.items()}},
    )


def ask(
    f: Ferryman, uri: str, headers: dict[str, str] | None = None, client: str = "127.0.0.1"
) -> tuple[str, str]:
    """(backend and the path it saw, or the status; the path that answered)."""
    before = fast_path_counts(f)
    transport = httpx.HTTPTransport(local_address=client)
    with httpx.Client(transport=transport, timeout=10) as c:
        r = c.get(f"http://127.0.0.1:{f.http_port}{uri}", headers={"Host": HOST, **(headers or {})})
    after = fast_path_counts(f)
    moved = (after[0] - before[0], after[1] - before[1])
    taken = {(1, 0): "module", (0, 1): "lua"}.get(moved, f"counts moved by {moved}")
    if r.status_code != 200:
        return str(r.status_code), taken
    body = r.json()
    return f"{body['name']} {body['path']}", taken


def test_rewrite_canary_and_allow_list_in_the_module(
    ferryman: Ferryman, backends: Backends
) -> None:
    f = ferryman
    f.write("canary-svc", service_with_backends("canary-svc", [backends.start("c")]))
    start(f, backends, _main(), _canary(**{"canary-by-header": "X-Canary"}))
    eventually(lambda: ask(f, "/p0/x", {"X-Canary": "always"})[0] == "c /r/x", 60, "canary live")
    # The groups of the location's caseless regex, the query string kept.
    assert ask(f, "/P0/a/b?q=1") == ("a /r/a/b?q=1", "module")
    assert ask(f, "/p0") == ("a /r/", "module")
    assert ask(f, "/p0/sp%20ace") == ("a /r/sp%20ace", "module")
    assert ask(f, "/p0/y", {"X-Canary": "always"}) == ("c /r/y", "module")
    assert ask(f, "/p0/y", {"X-Canary": "never"}) == ("a /r/y", "module")
    assert ask(f, "/p0/y", {"X-Canary": "Always"}) == ("a /r/y", "module")  # exactly
    # A client outside the list: refused by the module, canary or not.
    assert ask(f, "/p0/y", client="127.0.0.2") == ("a /r/y", "module")
    f.write("doc0", _main(allow="127.0.0.1/32"))
    eventually(lambda: ask(f, "/p0/y", client="127.0.0.2")[0] == "403", 30, "the new list")
    assert ask(f, "/p0/y", {"X-Canary": "always"}, client="127.0.0.2") == ("403", "module")
    assert ask(f, "/p0/z", {"X-Canary": "always"}) == ("c /r/z", "module")
    # -value, then -pattern, replace "always".
    f.write("doc1", _canary(**{"canary-by-header": "X-Canary", "canary-by-header-value": "yes"}))
    eventually(lambda: ask(f, "/p0/v", {"X-Canary": "yes"})[0] == "c /r/v", 30, "-value")
    assert ask(f, "/p0/v", {"X-Canary": "always"}) == ("a /r/v", "module")
    patterned = {"canary-by-header": "X-Canary", "canary-by-header-pattern": "^b(eta)?$"}
    f.write("doc1", _canary(**patterned))
    eventually(lambda: ask(f, "/p0/w", {"X-Canary": "beta"})[0] == "c /r/w", 30, "-pattern")
    assert ask(f, "/p0/w", {"X-Canary": "b"}) == ("c /r/w", "module")
    assert ask(f, "/p0/w", {"X-Canary": "yes"}) == ("a /r/w", "module")
    assert f.reloads() == 1
