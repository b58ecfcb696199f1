"""Mergeable Ingresses (``nginx.org/mergeable-ingress-type``) through real NGINX:
a master's host served with its minions' paths across namespaces, NIC's
inheritance and denylists, path conflicts, ``NoIngressMasterFound``, and
changes on either side re-translating the other with no reload."""

from __future__ import annotations

import socketserver
import threading
from typing import Any

from testkit.harness import (
    Backends,
    Ferryman,
    eventually,
    ingress,
    path,
    rule,
    service_with_backends,
    tls_secret,
)
from testkit.nic_fixtures import NIC_EXAMPLES

HOST = "cafe.example.com"
MASTER = {"nginx.org/mergeable-ingress-type": "master"}
MINION = {"nginx.org/mergeable-ingress-type": "minion"}
INGRESS_EXAMPLES = NIC_EXAMPLES.parent / "ingress-resources"


def master(annotations: dict[str, str] | None = None, **kw: Any) -> dict[str, Any]:
    r = {"host": HOST}
    return ingress("master", [r], annotations={**MASTER, **(annotations or {})}, **kw)


def minion(
    name: str, p: str, svc: str, annotations: dict[str, str] | None = None, **kw: Any
) -> dict[str, Any]:
    return ingress(
        name, [rule(HOST, path(p, svc))], annotations={**MINION, **(annotations or {})}, **kw
    )


def last(f: Ferryman, name: str) -> dict[str, str]:
    return f.events_for(name)[-1]


def test_minions_across_namespaces_and_changes_without_reload(
    either_fast_path: Ferryman, backends: Backends
) -> None:
    f = either_fast_path
    f.write("tea", service_with_backends("tea-svc", [backends.start("tea")], namespace="tea"))
    f.write("coffee", service_with_backends("coffee-svc", [backends.start("coffee")]))
    f.write("m", master())
    f.write("c", minion("coffee", "/coffee", "coffee-svc"))
    f.write("t", minion("tea", "/tea", "tea-svc", namespace="tea"))
    f.start()
    assert f.get(HOST, "/coffee/x").served_by == "coffee"
    assert f.get(HOST, "/tea").served_by == "tea"
    assert f.get(HOST, "/milk").status == 404
    assert last(f, "coffee")["reason"] == "AddedOrUpdated"
    assert last(f, "master")["reason"] == "AddedOrUpdated"
    m = f.metrics()
    name = "nginx_ingress_controller_ingress_resources_total"
    assert (m[f'{name}{{type="master"}}'], m[f'{name}{{type="minion"}}']) == (1, 2)
    # A minion's change re-translates its master: its path moves.
    f.write("c", minion("coffee", "/espresso", "coffee-svc"))
    eventually(lambda: f.get(HOST, "/espresso").served_by == "coffee", 60, "moved")
    assert f.get(HOST, "/coffee").status == 404
    # The master gone: its minions are orphans, NIC's Warning.
    f.remove("m")
    eventually(lambda: f.get(HOST, "/tea").status == 404, 60, "no master")
    eventually(lambda: last(f, "tea")["reason"] == "NoIngressMasterFound", 60, "orphan")
    assert last(f, "tea")["message"] == "Ingress master is invalid or doesn't exist"
    f.write("m", master())
    eventually(lambda: f.get(HOST, "/tea").served_by == "tea", 60, "master back")
    eventually(lambda: last(f, "tea")["reason"] == "AddedOrUpdated", 60, "served again")
    assert f.reloads() == 1


def test_inheritance_denylists_and_conflicts(ferryman: Ferryman, backends: Backends) -> None:
    f = ferryman
    f.write("svc", service_with_backends("app", [backends.start("a")]))
    f.write(
        "m",
        master(
            {
                "nginx.org/proxy-read-timeout": "1s",  # inherited by minions
                "nginx.org/use-cluster-ip": "false",  # not on a master
                "nginx.org/redirect-to-https": "true",  # the server's
            }
        ),
    )
    f.write(
        "slow",
        minion(
            "slow",
            "/slow",
            "app",
            {"nginx.org/proxy-read-timeout": "5s", "nginx.org/hsts": "true"},
            created="2024-01-01T00:00:00Z",
        ),
    )
    f.write("fast", minion("fast", "/fast", "app", created="2024-01-01T00:00:00Z"))
    # Younger than "slow", same path: "slow" keeps it.
    f.write("late", minion("late", "/slow", "app", created="2025-01-01T00:00:00Z"))
    f.start()
    assert f.get(HOST, "/fast?delay=2").status == 504  # the master's 1s
    assert f.get(HOST, "/slow?delay=2").served_by == "a"  # its own 5s
    r = f.get(HOST, "/fast", headers={"X-Forwarded-Proto": "http"})
    assert r.status == 301  # the master's redirect-to-https
    assert "strict-transport-security" not in f.get(HOST, "/slow").headers
    m = last(f, "master")
    assert m["reason"] == "AddedOrUpdatedWithWarning"
    assert "nginx.org/use-cluster-ip are not allowed on a master Ingress" in m["message"]
    s = last(f, "slow")
    assert "nginx.org/hsts are not allowed on a minion Ingress" in s["message"]
    late = last(f, "late")
    assert late["reason"] == "AddedOrUpdatedWithWarning"
    assert "path /slow is taken by another resource" in late["message"]
    assert f.reloads() == 1


def test_master_and_minion_specs_are_validated(ferryman: Ferryman, backends: Backends) -> None:
    f = ferryman
    f.write("svc", service_with_backends("app", [backends.start("a")]))
    bad_master = ingress("master", [rule(HOST, path("/", "app"))], annotations=MASTER)
    bad_minion = ingress(
        "minion",
        [rule(HOST, path("/a", "app"))],
        annotations=MINION,
        tls=[{"hosts": [HOST], "secretName": "s"}],
    )
    f.write("m", bad_master)
    f.write("n", bad_minion)
    f.start()
    assert last(f, "master")["reason"] == "Rejected"
    assert (
        "spec.rules[0].http.paths: Too many: 1: must have at most 0 items"
        in last(f, "master")["message"]
    )
    assert "spec.tls: Too many: 1: must have at most 0 items" in last(f, "minion")["message"]


def test_nic_mergeable_example(ferryman: Ferryman, backends: Backends) -> None:
    """README: https://cafe.example.com/tea and /coffee reach tea and coffee,
    from a master and two minions."""
    f = ferryman
    f.extra_args += ["--ingress-class", "nginx"]
    f.write("tea", service_with_backends("tea-svc", [backends.start("tea")]))
    f.write("coffee", service_with_backends("coffee-svc", [backends.start("coffee")]))
    f.write("secret", tls_secret("tls-secret", [HOST]))
    folder = INGRESS_EXAMPLES / "mergeable-ingress-types"
    for name in ("cafe-master.yaml", "coffee-minion.yaml", "tea-minion.yaml"):
        f.write_text(name, (folder / name).read_text())
    f.start()
    assert f.get(HOST, "/tea", https=True).served_by == "tea"
    assert f.get(HOST, "/coffee", https=True).served_by == "coffee"
    assert f.get(HOST, "/tea").status == 301  # the master's TLS: ssl-redirect
    assert last(f, "cafe-ingress-tea-minion")["reason"] == "AddedOrUpdated"
    assert f.reloads() == 1


def test_minion_policies_apply_to_its_paths(ferryman: Ferryman, backends: Backends) -> None:
    from testkit.vs_policies import policy

    f = ferryman
    f.write("svc", service_with_backends("app", [backends.start("a")]))
    f.write("p", policy("deny", accessControl={"deny": ["127.0.0.0/8"]}))
    f.write("m", master())
    f.write("open", minion("open", "/open", "app"))
    f.write("shut", minion("shut", "/shut", "app", {"nginx.org/policies": "deny"}))
    f.start()
    assert f.get(HOST, "/open").served_by == "a"
    assert f.get(HOST, "/shut").status == 403


class _RawHeaders(socketserver.ThreadingTCPServer):
    """A backend answering each request with its header lines exactly as they
    arrived (name spelling included), one per line."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _RawHandler)
        threading.Thread(target=self.serve_forever, daemon=True).start()
        self.port = int(self.server_address[1])
        self.name = "raw"


class _RawHandler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        while True:
            lines = []
            line = self.rfile.readline()
            if not line:
                return
            while (line := self.rfile.readline()) not in (b"\r\n", b"\n", b""):
                lines.append(line.rstrip(b"\r\n"))
            body = b"\n".join(lines)
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))


def test_proxy_set_headers_combine_master_and_minion_as_written(ferryman: Ferryman) -> None:
    """NIC's mergeable rules for nginx.org/proxy-set-headers: the master's headers
    reach every minion's paths, a minion's own are added to them (its value wins
    for a name both set), and every name reaches the backend spelled as written."""
    raw = _RawHeaders()
    try:
        f = ferryman
        f.write("svc", service_with_backends("app", [raw]))
        f.write("m", master({"nginx.org/proxy-set-headers": "X-Forwarded-ABC: master, X-Both: m"}))
        f.write(
            "tea",
            minion(
                "tea",
                "/tea",
                "app",
                {"nginx.org/proxy-set-headers": "X-Tea: v1, Abc123, x-both: t"},
            ),
        )
        f.write("coffee", minion("coffee", "/coffee", "app"))
        f.start()
        tea = f.get(HOST, "/tea", headers={"abc123": "client"}).text.split("\n")
        coffee = f.get(HOST, "/coffee").text.split("\n")
        assert "X-Forwarded-ABC: master" in coffee and "X-Both: m" in coffee
        assert "X-Forwarded-ABC: master" in tea
        assert "X-Tea: v1" in tea and "Abc123: client" in tea
        both = [line for line in tea if line.lower().startswith("x-both:")]
        assert both == ["x-both: t"]
    finally:
        raw.shutdown()
        raw.server_close()


def test_masters_app_root_redirects_the_root(ferryman: Ferryman, backends: Backends) -> None:
    """NIC's nginx.org/app-root is server-level: the master's answers / with 302."""
    f = ferryman
    f.write("coffee", service_with_backends("coffee-svc", [backends.start("coffee")]))
    f.write("m", master({"nginx.org/app-root": "/coffee"}))
    f.write("c", minion("coffee", "/coffee", "coffee-svc"))
    f.start()
    r = f.get(HOST, "/")
    assert (r.status, r.headers["location"]) == (302, f"http://{HOST}/coffee")
    assert f.get(HOST, "/coffee").served_by == "coffee"
    assert f.reloads() == 1
