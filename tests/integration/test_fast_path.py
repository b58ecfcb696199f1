"""ngx_http_ferryman_module: the fast path in C, and what it hands to the Lua slow path.

scripts/setup.sh builds the module, so every other integration test runs with it
too; these tests pin down which path serves what, the module's own parsing of
endpoints (IPv6), and the Lua fast path that serves when the module is absent.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from testkit.harness import (
    Backends,
    Ferryman,
    eventually,
    fast_path_counts,
    ingress,
    path,
    rule,
    served_by,
    service_with_backends,
    without_fast_module,
)

RR = "rr.example.com"
LC = "lc.example.com"


def test_proxied_requests_run_in_the_module_and_the_rest_is_handed_over(
    ferryman: Ferryman, backends: Backends
) -> None:
    pods = [backends.start("pod0"), backends.start("pod1")]
    ferryman.write("svc", service_with_backends("app", pods))
    ferryman.write("svc-lc", service_with_backends("lc", [backends.start("lc0")]))
    ferryman.write("ing", ingress("rr", [rule(RR, path("/app", "app"))]))
    ferryman.write(
        "ing-lc",
        ingress(
            "lc", [rule(LC, path("/", "lc"))], annotations={"nginx.org/lb-method": "least_conn"}
        ),
    )
    ferryman.start()
    assert "ferryman_fast;" in (ferryman.state / "nginx.conf").read_text()
    assert "runs_in=ngx_http_ferryman_module" in ferryman.logs()
    fast, slow = fast_path_counts(ferryman)

    spread = Counter(served_by(ferryman, RR, f"/app/{i}") for i in range(10))
    assert spread == {"pod0": 5, "pod1": 5}
    assert served_by(ferryman, RR, "/elsewhere") == "404"  # no route
    assert served_by(ferryman, "unknown.example.com", "/app") == "404"  # no host
    assert served_by(ferryman, LC, "/") == "lc0"  # least_conn: the module too

    now_fast, now_slow = fast_path_counts(ferryman)
    assert (now_fast - fast, now_slow - slow) == (11, 2)


def test_endpoints_with_ipv6_addresses(ferryman: Ferryman, backends: Backends) -> None:
    pod = backends.start("v6", "::1")
    ferryman.write("svc", service_with_backends("app", [pod]))  # an IPv6 EndpointSlice
    ferryman.write("ing", ingress("rr", [rule(RR, path("/", "app"))]))
    ferryman.start()
    fast, _ = fast_path_counts(ferryman)
    assert [served_by(ferryman, RR, f"/{i}") for i in range(3)] == ["v6"] * 3
    assert fast_path_counts(ferryman)[0] - fast == 3
    assert pod.hits == 3


def test_endpoint_changes_reach_the_module_without_reload(
    ferryman: Ferryman, backends: Backends
) -> None:
    old, new = backends.start("old"), backends.start("new")
    ferryman.write("svc", service_with_backends("app", [old]))
    ferryman.write("ing", ingress("rr", [rule(RR, path("/", "app"))]))
    ferryman.start()
    assert served_by(ferryman, RR, "/") == "old"
    fast, _ = fast_path_counts(ferryman)
    ferryman.write("svc", service_with_backends("app", [new]))
    eventually(lambda: served_by(ferryman, RR, "/") == "new", 60, "traffic on the new endpoint")
    assert {served_by(ferryman, RR, f"/{i}") for i in range(6)} == {"new"}
    assert fast_path_counts(ferryman)[0] - fast >= 7
    assert ferryman.reloads() == 1


def test_without_the_module_the_lua_balancer_is_the_fast_path(
    ferryman: Ferryman, backends: Backends, tmp_path: Path
) -> None:
    ferryman.extra_args += without_fast_module(tmp_path)
    pods = [backends.start(f"pod{i}") for i in range(3)]
    ferryman.write("svc", service_with_backends("app", pods))
    ferryman.write("ing", ingress("rr", [rule(RR, path("/", "app"))]))
    ferryman.start()
    conf = (ferryman.state / "nginx.conf").read_text()
    assert "ferryman.fast()" in conf
    assert "ngx_http_ferryman_module.so" not in conf
    assert "runs_in=lua" in ferryman.logs()
    assert Counter(served_by(ferryman, RR, f"/r{i}") for i in range(30)) == {
        "pod0": 10,
        "pod1": 10,
        "pod2": 10,
    }
    assert served_by(ferryman, RR.replace("rr", "nobody"), "/") == "404"
    assert not any(k.startswith("ferryman_fast_path") for k in ferryman.metrics())
