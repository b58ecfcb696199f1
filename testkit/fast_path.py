"""VirtualServers on the module's fast path: documents, requests, raw pushes to its
endpoints socket and the NGINX workers.

Moved from tests/integration/test_vs_fast_path.py, whose tests and others share them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from testkit.harness import (
    Backends,
    Ferryman,
    fast_path_counts,
    service,
    service_with_backends,
)

HOST = "vs-fast.example.com"


def virtual_server(
    routes: list[dict[str, Any]],
    upstreams: list[dict[str, Any]] | None = None,
    policies: list[dict[str, str]] | None = None,
    name: str = "fast",
    host: str = HOST,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "host": host,
        "upstreams": upstreams
        or [{"name": s, "service": s, "port": 80} for s in ("a", "b", "empty")],
        "routes": routes,
    }
    if policies:
        spec["policies"] = policies
    return {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "VirtualServer",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def answer(f: Ferryman, path: str, host: str = HOST, **kw: Any) -> tuple[str, str]:
    """(who answered: the backend's name or the status and body, which path took it)."""
    before = fast_path_counts(f)
    r = httpx.get(
        f"http://127.0.0.1:{f.http_port}{path}",
        headers={"Host": host, **kw.pop("headers", {})},
        follow_redirects=False,
        timeout=30,
        **kw,
    )
    after = fast_path_counts(f)
    moved = (after[0] - before[0], after[1] - before[1])
    taken = {(1, 0): "module", (0, 1): "lua"}.get(moved, f"counts moved by {moved}")
    try:
        who = str(r.json()["name"])
    except ValueError:
        words = r.text.split()
        who = f"{r.status_code} {words[0] if words else ''}"
    return who, taken


def _start(f: Ferryman, backends: Backends, *docs: dict[str, Any]) -> None:
    for name in ("a", "b"):
        f.write(f"svc-{name}", service_with_backends(name, [backends.start(name)]))
    f.write("svc-empty", service("empty"))
    for i, d in enumerate(docs):
        f.write(f"doc-{i}", d)
    f.start()


def _push_raw(f: Ferryman, line: str) -> None:
    r = f.push_lines([line])
    assert r.status_code == 200, r.text


def _workers(f: Ferryman) -> set[int]:
    master = f.nginx_master_pid()
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == master:
            found.add(int(stat.parent.name))
    return found
