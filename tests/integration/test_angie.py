"""The Angie data plane on a real Angie (built from ../shared/vendor by
scripts/build-angie.sh): what only Angie does. Routing, TLS, endpoints,
classes, rejections and the lifecycle run on both flavours in their own files."""

from __future__ import annotations

import base64
import re
import threading
from pathlib import Path

import pytest

from testkit.harness import (
    Backends,
    Ferryman,
    eventually,
    ingress,
    path,
    rule,
    served_by,
    service,
    service_with_backends,
    tls_secret,
)

pytestmark = pytest.mark.flavours("angie")


def _workers(f: Ferryman) -> set[int]:
    master = f.nginx_master_pid()
    assert master is not None
    return {int(p) for p in Path(f"/proc/{master}/task/{master}/children").read_text().split()}


def test_every_reload_is_counted_as_angie_counts_them(
    ferryman: Ferryman, backends: Backends
) -> None:
    """Ten reloading changes: ferryman's reload metrics, timing and log lines
    match Angie's own count of configuration loads."""
    app = backends.start("app")
    ferryman.write("svc", service_with_backends("app", [app]))
    ferryman.write("ing0", ingress("i0", [rule("h0.test", path("/", "app"))]))
    ferryman.start()
    # Angie's start, then one start-up reload. (Right after a reload an old
    # worker may still answer the socket for a moment: hence eventually.)
    eventually(lambda: ferryman.angie_generation() == 2, 60, "generation 2")
    assert ferryman.reloads() == 1

    def reloaded(n: int) -> None:
        eventually(lambda: ferryman.reloads() == n, 60, f"reload {n}")

    # Hosts: three added, one path changed, one removed.
    for i in (1, 2, 3):
        ferryman.write(f"ing{i}", ingress(f"i{i}", [rule(f"h{i}.test", path("/", "app"))]))
        reloaded(1 + i)
    ferryman.write("ing1", ingress("i1", [rule("h1.test", path("/x", "app"))]))
    reloaded(5)
    ferryman.remove("ing3")
    reloaded(6)
    # Certificates: TLS on, then a rotated Secret.
    tls = [{"hosts": ["h2.test"], "secretName": "cert"}]
    ferryman.write("cert", tls_secret("cert", ["h2.test"]))
    ferryman.write("ing2", ingress("i2", [rule("h2.test", path("/", "app"))], tls=tls))
    reloaded(7)
    ferryman.write("cert", tls_secret("cert", ["h2.test", "other.test"]))
    reloaded(8)
    # Endpoints: a backend's N -> 0 and 0 -> N change the text (503 locations).
    ferryman.write("svc", service("app"))
    reloaded(9)
    assert served_by(ferryman, "h0.test", "/") == "503"
    ferryman.write("svc", service_with_backends("app", [app]))
    reloaded(10)
    # And a path type.
    ferryman.write("ing0", ingress("i0", [rule("h0.test", path("/", "app", "Exact"))]))
    reloaded(11)
    eventually(lambda: served_by(ferryman, "h0.test", "/") == "app", 60, "served again")

    eventually(lambda: ferryman.angie_generation() == 12, 60, "generation 12")
    assert ferryman.reloads() == 11
    m = ferryman.metrics()
    name = "nginx_ingress_controller_nginx_reloads_total"
    assert m[f'{name}{{reason="endpoints"}}'] == 2
    assert m[f'{name}{{reason="other"}}'] == 9
    assert m["nginx_ingress_controller_nginx_last_reload_milliseconds"] > 0
    assert m["nginx_ingress_controller_nginx_last_reload_status"] == 1
    assert m["ferryman_nginx_reload_duration_seconds_count"] == 11
    lines = re.findall(r'msg="nginx reloaded" reason=(\w+)', ferryman.logs())
    assert sorted(lines) == ["endpoints"] * 2 + ["other"] * 9


def test_endpoints_move_through_dns_without_a_reload(
    ferryman: Ferryman, backends: Backends
) -> None:
    first, second = backends.start("first"), backends.start("second")
    ferryman.write("svc", service_with_backends("app", [first]))
    ferryman.write("ing", ingress("r", [rule("dns.test", path("/", "app"))]))
    ferryman.start()
    assert served_by(ferryman, "dns.test", "/") == "first"
    eventually(lambda: ferryman.angie_generation() == 2, 60, "generation 2")
    workers = eventually(lambda: len(w := _workers(ferryman)) == 2 and w, 60, "2 workers")
    ferryman.write("svc", service_with_backends("app", [second]))
    # Angie re-resolves about every TTL + 1 s.
    eventually(lambda: served_by(ferryman, "dns.test", "/") == "second", 60, "the move")
    assert ferryman.angie_generation() == 2
    assert _workers(ferryman) == workers
    assert ferryman.reloads() == 1


def test_least_conn_and_ipv6_endpoints(ferryman: Ferryman, backends: Backends) -> None:
    """``least_conn`` with peers from DNS (SRV), and IPv6 endpoints (AAAA targets)."""
    v6 = [backends.start(f"v6-{i}", "::1") for i in range(2)]
    docs = service_with_backends("app", v6)
    for d in docs:
        if d["kind"] == "EndpointSlice":
            d["addressType"] = "IPv6"
            d["endpoints"][0]["addresses"] = ["::1"]
    ferryman.write("svc", docs)
    annotations = {"nginx.org/lb-method": "least_conn"}
    ferryman.write(
        "ing", ingress("lc", [rule("lc.test", path("/", "app"))], annotations=annotations)
    )
    ferryman.start()
    seen = {served_by(ferryman, "lc.test", "/") for _ in range(20)}
    assert seen == {"v6-0", "v6-1"}
    servers = (ferryman.state / "servers.conf").read_text()
    assert "least_conn;" in servers
    # A slow request holds one peer: least_conn sends the others elsewhere.
    hits = {b.name: b.hits for b in v6}
    slow = threading.Thread(target=ferryman.get, args=("lc.test", "/?delay=1.5"))
    slow.start()
    try:
        eventually(lambda: any(b.hits > hits[b.name] for b in v6), 3, "the slow request")
        busy = next(b.name for b in v6 if b.hits > hits[b.name])
        others = {served_by(ferryman, "lc.test", "/") for _ in range(6)}
        assert busy not in others
    finally:
        slow.join()


def test_certificates_are_files_only_ferryman_reads(ferryman: Ferryman, backends: Backends) -> None:
    ferryman.write("svc", service_with_backends("app", [backends.start("app")]))
    ferryman.write("cert", tls_secret("cert", ["tls.test"]))
    tls = [{"hosts": ["tls.test"], "secretName": "cert"}]
    ferryman.write("ing", ingress("t", [rule("tls.test", path("/", "app"))], tls=tls))
    ferryman.start()
    assert served_by(ferryman, "tls.test", "/", https=True) == "app"
    certs = list((ferryman.state / "certs").iterdir())
    assert len(certs) == 2
    assert all(c.stat().st_mode & 0o777 == 0o600 for c in certs)
    key = next(c for c in certs if c.suffix == ".key").read_bytes()
    assert base64.b64encode(key)  # a real key, not a placeholder
