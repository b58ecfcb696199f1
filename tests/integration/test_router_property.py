"""NGINX's router routes exactly like ``ferryman.configs.routes.match``: the fast path in
ngx_http_ferryman_module (with the Lua slow path behind it), and the Lua fast path
that serves when the module is absent.

Hypothesis draws an Ingress (one host, 10-25 paths over a tiny alphabet so that
duplicates, Exact/Prefix ties and prefix relations are frequent) and request
paths over the same alphabet; every answer (the backend's name or 404) must be
what ``match`` predicts from the virtual host ``virtual_hosts`` builds.

A ferryman start costs more than a second, so one ferryman serves every example
of a test: each example rewrites the Ingress and waits for a marker path that
only the new version routes (an Exact path, unique per example, to backend
"d", which nothing else uses) before checking.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from testkit import router_kit as kit
from testkit.harness import (
    Backends,
    Ferryman,
)
from testkit.ingress_router import check_example, drawn, serve_router


@pytest.fixture
def router(
    either_fast_path: Ferryman, backends: Backends
) -> Iterator[tuple[Ferryman, kit.HostClient]]:
    """ferryman with the fast path in ngx_http_ferryman_module, or in Lua."""
    yield from serve_router(either_fast_path, backends)


@kit.examples(15)
@drawn
def test_router_routes_like_match(
    router: tuple[Ferryman, kit.HostClient],
    rules: list[tuple[str, str, str]],
    default: str | None,
    requests: list[str],
) -> None:
    answers, counts = check_example(*router, rules, default, requests)
    if counts is not None:
        # The module itself routed: every 200 was proxied by it, every 404 handed over.
        routed = sum(got != "404" for _, _, got in answers)
        assert counts == (routed, len(answers) - routed)
