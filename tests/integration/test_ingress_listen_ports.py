"""``nginx.org/listen-ports``, ``listen-ports-ssl`` and ``use-cluster-ip`` on
Ingress through real NGINX and real backends (kinds/ingress/records/ports.py,
translators/listen_ports.py, configs/endpoints.py): the host answers on its
own ports only, a new port reloads once and a move between open ports not at
all, refused ports are Warnings, and use-cluster-ip proxies to the Service's
ClusterIP."""

from __future__ import annotations

from typing import Any

from testkit.cluster_ip import assert_use_cluster_ip
from testkit.harness import (
    Backends,
    Ferryman,
    eventually,
    free_port,
    ingress,
    path,
    rule,
    service_with_backends,
    tls_secret,
)
from testkit.listeners import get_on


def _ing(name: str, host: str, annotations: dict[str, str], tls: bool = False) -> dict[str, Any]:
    return ingress(
        name,
        [rule(host, path("/", "app"))],
        annotations=annotations,
        tls=[{"hosts": [host], "secretName": "tls"}] if tls else None,
    )


def _reload_errors(f: Ferryman) -> float:
    return f.metrics()["nginx_ingress_controller_nginx_reload_errors_total"]


def test_hosts_answer_on_their_ports_only(either_fast_path: Ferryman, backends: Backends) -> None:
    """listen-ports and listen-ports-ssl replace the default ports for the
    Ingress's host (NIC's server block listens there only); plain HTTP is
    redirected to the first TLS port; a host without them keeps the defaults."""
    f = either_fast_path
    plain, tls = free_port(), free_port()
    f.write("svc", service_with_backends("app", [backends.start("a")]))
    f.write("secret", tls_secret("tls", ["ports.test", "other.test"]))
    ports = {"nginx.org/listen-ports": str(plain), "nginx.org/listen-ports-ssl": str(tls)}
    f.write("ports", _ing("ports", "ports.test", ports, tls=True))
    f.write("other", _ing("other", "other.test", {}, tls=True))
    f.start()
    assert get_on(tls, "ports.test", "/", https=True).served_by == "a"
    r = get_on(plain, "ports.test", "/x?y=1")
    # NIC: return 301 https://$host:<first listen-ports-ssl port>$request_uri
    assert (r.status, r.headers["location"]) == (301, f"https://ports.test:{tls}/x?y=1")
    assert f.get("ports.test", "/").status == 404
    assert f.get("ports.test", "/", https=True).status == 404
    assert f.get("other.test", "/", https=True).served_by == "a"
    assert get_on(plain, "other.test", "/").status == 404
    assert get_on(tls, "other.test", "/", https=True).status == 404
    event = f.events_for("ports")[-1]
    assert (event["reason"], event["message"]) == (
        "AddedOrUpdated",
        "Configuration for default/ports was added or updated",
    )
    assert f.reloads() == 1  # the start-up reload only


def test_new_port_reloads_once_and_moves_do_not(ferryman: Ferryman, backends: Backends) -> None:
    """A port nobody had opens with one reload; a host moving between ports
    already open, or back to the default port, is a record change: no reload.
    The default port in the list keeps the host there too."""
    f = ferryman
    p1, p2 = free_port(), free_port()
    f.write("svc", service_with_backends("app", [backends.start("a")]))
    f.write("a", _ing("a", "a.test", {}))
    f.write("b", _ing("b", "b.test", {"nginx.org/listen-ports": str(p1)}))
    f.start()
    assert get_on(p1, "b.test", "/").served_by == "a"
    assert get_on(p1, "a.test", "/").status == 404
    start = f.reloads()
    assert start == 1

    # A new port: one reload.
    f.write("b", _ing("b", "b.test", {"nginx.org/listen-ports": f"{p1},{p2}"}))
    eventually(lambda: get_on(p2, "b.test", "/").served_by == "a", 60, "b on p2")
    assert get_on(p1, "b.test", "/").served_by == "a"
    assert f.reloads() == start + 1

    # Ingress a moves between ports b keeps open, and back: no reload.
    f.write("a", _ing("a", "a.test", {"nginx.org/listen-ports": str(p2)}))
    eventually(lambda: get_on(p2, "a.test", "/").served_by == "a", 60, "a on p2")
    assert f.get("a.test", "/").status == 404
    f.write("a", _ing("a", "a.test", {"nginx.org/listen-ports": f"{p1},{f.http_port}"}))
    eventually(lambda: get_on(p1, "a.test", "/").served_by == "a", 60, "a on p1")
    assert f.get("a.test", "/").served_by == "a"
    assert get_on(p2, "a.test", "/").status == 404
    f.write("a", _ing("a", "a.test", {}))
    eventually(lambda: get_on(p1, "a.test", "/").status == 404, 60, "a off p1")
    assert f.get("a.test", "/").served_by == "a"
    assert f.reloads() == start + 1
    assert _reload_errors(f) == 0


def test_refused_ports_warn_and_the_rest_serves(ferryman: Ferryman, backends: Backends) -> None:
    """Ports NGINX would refuse or that another part holds are left out with a
    Warning each; NGINX never gets a configuration failing nginx -t, and the
    Ingress keeps serving on its other ports. A port an older Ingress serves
    with TLS is not opened for plain HTTP, until that Ingress goes."""
    f = ferryman
    ok, shared = free_port(), free_port()
    asked = f"{ok},70000,{f.ready_port},{f.https_port}"
    f.write("svc", service_with_backends("app", [backends.start("a")]))
    f.write("secret", tls_secret("tls", ["old.test"]))
    old = ingress(
        "old",
        [rule("old.test", path("/", "app"))],
        annotations={"nginx.org/listen-ports-ssl": str(shared)},
        tls=[{"hosts": ["old.test"], "secretName": "tls"}],
        created="2020-01-01T00:00:00Z",
    )
    f.write("old", old)
    bad = {"nginx.org/listen-ports": asked}
    f.write("bad", _ing("bad", "bad.test", bad))
    f.write(
        "new",
        ingress(
            "new",
            [rule("new.test", path("/", "app"))],
            annotations={"nginx.org/listen-ports": f"{ok},{shared}"},
            created="2021-01-01T00:00:00Z",
        ),
    )
    f.start()
    assert get_on(ok, "bad.test", "/").served_by == "a"
    assert f.get("bad.test", "/").status == 404
    event = f.events_for("bad")[-1]
    assert event["reason"] == "AddedOrUpdatedWithWarning"
    assert event["message"] == (
        "Configuration for default/bad was added or updated with warning(s): "
        "nginx.org/listen-ports: port 70000 is above 65535; the host is not served on it; "
        f"nginx.org/listen-ports: port {f.ready_port} is ferryman's --ready-port; "
        "the host is not served on it; "
        f"nginx.org/listen-ports: port {f.https_port} is ferryman's --https-port (TLS); "
        "the host is not served on it"
    )
    assert get_on(shared, "old.test", "/", https=True).served_by == "a"
    assert get_on(ok, "new.test", "/").served_by == "a"
    assert f.events_for("new")[-1]["message"].endswith(
        f"nginx.org/listen-ports: port {shared} is served with TLS for Ingress default/old; "
        "the host is not served on it"
    )
    assert _reload_errors(f) == 0

    # The older Ingress goes: the port is opened for plain HTTP (a reload: its scheme).
    f.remove("old")
    eventually(lambda: get_on(shared, "new.test", "/").served_by == "a", 60, "new on shared")
    f.last_event("new", "AddedOrUpdated")
    assert _reload_errors(f) == 0


def test_use_cluster_ip_proxies_to_the_cluster_ip(
    either_fast_path: Ferryman, backends: Backends
) -> None:
    """NIC's use-cluster-ip: the upstream is the Service's ClusterIP and port,
    not its endpoints (kube-proxy balances); switching either way is an
    endpoint-set change, no reload."""

    def annotated(name: str, host: str, port: int, on: bool) -> dict[str, Any]:
        annotations = {"nginx.org/use-cluster-ip": "true"} if on else None
        return ingress(name, [rule(host, path("/", "app", port=port))], annotations=annotations)

    assert_use_cluster_ip(either_fast_path, backends, annotated)
