"""NGINX's record memory is shared by every tenant: what does not fit is refused
alone, and everyone else keeps updating (issue 11, "one tenant can freeze every
update")."""

from __future__ import annotations

from typing import Any

import httpx

from testkit.harness import (
    Backends,
    Ferryman,
    Response,
    eventually,
    free_port,
    ingress,
    path,
    rule,
    served_by,
    service_with_backends,
)

# One hog's host record: 100 paths of ~200 bytes, ~21 kB. Moderate paths and
# counts on purpose: the test is about the shared memory, not the parser's caps.
HOG_PATHS = 100
HOGS = 130


def _hog(n: int) -> dict[str, Any]:
    paths = [path(f"/{n:04d}/{i:03d}/" + "x" * 190, "hog") for i in range(HOG_PATHS)]
    return ingress(f"hog-{n}", [rule(f"hog-{n}.test", *paths)], namespace="hog")


def _rejected(f: Ferryman) -> dict[str, str]:
    return {e["name"]: e["message"] for e in f.events() if e["reason"] == "Rejected"}


def test_a_full_record_memory_rejects_only_what_does_not_fit(
    either_fast_path: Ferryman, backends: Backends
) -> None:
    f = either_fast_path
    a, b, c = backends.start("a"), backends.start("b"), backends.start("c")
    # 2 MiB of records and a cap above each hog's record: the memory is what fills.
    f.extra_args += ["--records-memory-size", "2m", "--max-record-bytes", "1000000"]
    f.write("web-svc", service_with_backends("web", [a], namespace="web"))
    f.write("web", ingress("web", [rule("web.test", path("/", "web"))], namespace="web"))
    f.write("hog-svc", service_with_backends("hog", [c], namespace="hog"))
    f.start()
    assert served_by(f, "web.test", "/") == "a"

    # ~2.8 MB of host records from one tenant: more than the memory holds.
    f.write("hogs", *[_hog(n) for n in range(HOGS)])
    rejected = eventually(lambda: _rejected(f), 60, "a hog rejected")
    message = next(iter(rejected.values()))
    assert "does not fit in NGINX's record memory (--records-memory-size 2m" in message, message

    # Another tenant's endpoint change and new Ingress still go live.
    f.write("web-svc", service_with_backends("web", [b], namespace="web"))
    eventually(lambda: served_by(f, "web.test", "/") == "b", 60, "endpoint change live")
    f.write(
        "late",
        service_with_backends("late", [c], namespace="late"),
        ingress("late", [rule("late.test", path("/", "late"))], namespace="late"),
    )
    eventually(lambda: served_by(f, "late.test", "/") == "c", 60, "new Ingress live")
    f.last_event("late", "AddedOrUpdated")  # written after the push that serves it
    assert [e["reason"] for e in f.events_for("late")] == ["AddedOrUpdated"]

    # ...while one more big record is refused: the end of the memory is kept.
    f.write("late-big", _hog(9999) | {"metadata": {"name": "late-big", "namespace": "late"}})
    message = eventually(lambda: _rejected(f).get("late-big"), 60, "late-big rejected")
    assert "its last 10% is kept for records up to 4 KiB and endpoint sets" in message

    # A rejected hog was withdrawn and never reported as live; the others serve.
    rejected = _rejected(f)
    live = [e["name"] for e in f.events() if e["reason"] == "AddedOrUpdated"]
    assert not set(rejected) & set(live), f.logs()[-3000:]
    assert 0 < len(rejected) < HOGS
    name = sorted(rejected)[0]
    assert served_by(f, f"{name}.test", f"/{int(name[4:]):04d}/000/" + "x" * 190) == "404"
    first_live = sorted(n for n in live if n.startswith("hog-"))[0]
    assert served_by(f, f"{first_live}.test", f"/{int(first_live[4:]):04d}/000/" + "x" * 190) == "c"
    assert 0.5 < f.metrics()['ferryman_records_memory_ratio{store="dict"}'] <= 1


# ---- records assembled from several resources: the contributor pays ----------------

SMALL_LIMIT = 6000
MERGED = "shop.test"


def _many_paths(prefix: str, service: str, n: int = 100) -> list[dict[str, Any]]:
    return [path(f"/{prefix}/{i:03d}/" + "y" * 80, service) for i in range(n)]


def test_a_big_minion_is_rejected_alone_and_its_master_keeps_serving(
    either_fast_path: Ferryman, backends: Backends
) -> None:
    f = either_fast_path
    f.extra_args += ["--max-record-bytes", str(SMALL_LIMIT)]
    master = {"nginx.org/mergeable-ingress-type": "master"}
    minion = {"nginx.org/mergeable-ingress-type": "minion"}
    f.write("a-svc", service_with_backends("a", [backends.start("a")], namespace="a"))
    f.write("b-svc", service_with_backends("b", [backends.start("b")], namespace="b"))
    f.write("master", ingress("master", [{"host": MERGED}], annotations=master, namespace="a"))
    f.write(
        "small",
        ingress("small", [rule(MERGED, path("/small", "a"))], annotations=minion, namespace="a"),
    )
    # ~10 kB of paths from another namespace: the host's record would not fit.
    big = ingress(
        "big", [rule(MERGED, *_many_paths("big", "b"))], annotations=minion, namespace="b"
    )
    f.write("big", big)
    f.start()

    assert served_by(f, MERGED, "/small") == "a"
    assert served_by(f, MERGED, "/big/000/" + "y" * 80) == "404"
    message = eventually(lambda: _rejected(f).get("big"), 60, "the big minion rejected")
    assert f"the virtual host {MERGED}" in message, message
    assert f"more than --max-record-bytes {SMALL_LIMIT}" in message, message
    assert "master" not in _rejected(f)
    assert f.events_for("master")[-1]["reason"] == "AddedOrUpdated"
    assert f.events_for("small")[-1]["reason"] == "AddedOrUpdated"

    # Another tenant's new minion still goes live; the big one, once small, too.
    f.write(
        "late",
        ingress("late", [rule(MERGED, path("/late", "a"))], annotations=minion, namespace="a"),
    )
    eventually(lambda: served_by(f, MERGED, "/late") == "a", 60, "a new minion live")
    small_big = ingress(
        "big", [rule(MERGED, *_many_paths("big", "b", 3))], annotations=minion, namespace="b"
    )
    f.write("big", small_big)
    eventually(lambda: served_by(f, MERGED, "/big/000/" + "y" * 80) == "b", 60, "big fits")
    eventually(lambda: f.events_for("big")[-1]["reason"] == "AddedOrUpdated", 60, "big served")


def test_a_minion_nginx_has_no_room_for_is_rejected_alone(
    ferryman: Ferryman, backends: Backends
) -> None:
    f = ferryman
    f.extra_args += ["--records-memory-size", "1m"]
    master = {"nginx.org/mergeable-ingress-type": "master"}
    minion = {"nginx.org/mergeable-ingress-type": "minion"}
    f.write("a-svc", service_with_backends("a", [backends.start("a")], namespace="a"))
    f.write("b-svc", service_with_backends("b", [backends.start("b")], namespace="b"))
    f.write("hog-svc", service_with_backends("hog", [backends.start("c")], namespace="hog"))
    f.write("master", ingress("master", [{"host": MERGED}], annotations=master, namespace="a"))
    f.write(
        "small",
        ingress("small", [rule(MERGED, path("/small", "a"))], annotations=minion, namespace="a"),
    )
    f.start()
    assert served_by(f, MERGED, "/small") == "a"
    # ~1 MB of other hosts: the memory is full up to its reserve.
    f.write("hogs", *[_hog(n) for n in range(50)])
    eventually(lambda: _rejected(f), 60, "a hog rejected")

    # ~30 kB of paths from another namespace: no room for the master's record with them.
    big = ingress(
        "big", [rule(MERGED, *_many_paths("big", "b", 300))], annotations=minion, namespace="b"
    )
    f.write("big", big)
    message = eventually(lambda: _rejected(f).get("big"), 60, "the big minion rejected")
    assert f"with its paths, the virtual host {MERGED} does not fit in NGINX's record" in message
    assert "master" not in _rejected(f)
    assert served_by(f, MERGED, "/small") == "a"
    assert served_by(f, MERGED, "/big/000/" + "y" * 80) == "404"


def test_a_big_selected_route_is_rejected_alone_and_its_virtual_server_keeps_serving(
    ferryman: Ferryman, backends: Backends
) -> None:
    f = ferryman
    f.extra_args += ["--max-record-bytes", str(SMALL_LIMIT)]
    f.write("a-svc", service_with_backends("web", [backends.start("a")], namespace="a"))
    f.write("b-svc", service_with_backends("web", [backends.start("b")], namespace="b"))
    f.write(
        "vs",
        _vs(
            "a",
            [
                {"path": "/", "action": {"pass": "web"}},
                {"path": "/menu", "routeSelector": {"matchLabels": {"app": "menu"}}},
            ],
        ),
    )
    f.write("small", _vsr("a", "small", ["/menu/a"]))
    # ~10 kB of subroutes from another namespace: the host's records would not fit.
    f.write("big", _vsr("b", "big", [f"/menu/{i:03d}/" + "y" * 80 for i in range(100)]))
    f.start()

    assert served_by(f, MERGED, "/menu/a") == "a"
    assert served_by(f, MERGED, "/") == "a"
    assert served_by(f, MERGED, "/menu/000/" + "y" * 80) == "a"  # the VS's "/"
    event = eventually(lambda: _last(f, "VirtualServerRoute", "big", "b"), 60, "big reported")
    assert event["reason"] == "Rejected", event
    assert f"the virtual host {MERGED}" in event["message"], event
    assert f"more than --max-record-bytes {SMALL_LIMIT}" in event["message"], event
    assert _last(f, "VirtualServer", "cafe", "a")["reason"] == "AddedOrUpdated"
    assert _last(f, "VirtualServerRoute", "small", "a")["reason"] == "AddedOrUpdated"

    # A new route of another tenant still goes live.
    f.write("late", _vsr("a", "late", ["/menu/late"]))
    eventually(lambda: served_by(f, MERGED, "/menu/late") == "a", 60, "a new route live")
    assert _last(f, "VirtualServerRoute", "big", "b")["reason"] == "Rejected"


def test_a_route_nginx_has_no_room_for_is_rejected_alone(
    ferryman: Ferryman, backends: Backends
) -> None:
    f = ferryman
    f.extra_args += ["--records-memory-size", "1m"]
    f.write("a-svc", service_with_backends("web", [backends.start("a")], namespace="a"))
    f.write("b-svc", service_with_backends("web", [backends.start("b")], namespace="b"))
    f.write("hog-svc", service_with_backends("hog", [backends.start("c")], namespace="hog"))
    routes = [
        {"path": "/", "action": {"pass": "web"}},
        {"path": "/menu", "routeSelector": {"matchLabels": {"app": "menu"}}},
    ]
    f.write("vs", _vs("a", routes))
    f.write("small", _vsr("a", "small", ["/menu/a"]))
    f.start()
    assert served_by(f, MERGED, "/menu/a") == "a"
    f.write("hogs", *[_hog(n) for n in range(50)])
    eventually(lambda: _rejected(f), 60, "a hog rejected")

    # ~30 kB of subroutes from another namespace: no room for the host's records with them.
    f.write("big", _vsr("b", "big", [f"/menu/{i:03d}/" + "y" * 80 for i in range(300)]))

    def rejected() -> bool:
        return _last(f, "VirtualServerRoute", "big", "b").get("reason") == "Rejected"

    eventually(rejected, 60, "the big route rejected")
    event = _last(f, "VirtualServerRoute", "big", "b")
    assert "does not fit in NGINX's record memory" in event["message"], event
    assert _last(f, "VirtualServer", "cafe", "a")["reason"] == "AddedOrUpdated"
    assert served_by(f, MERGED, "/menu/a") == "a"
    assert served_by(f, MERGED, "/menu/000/" + "y" * 80) == "a"  # the VS's "/"


def _vs(namespace: str, routes: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "VirtualServer",
        "metadata": {"name": "cafe", "namespace": namespace},
        "spec": {
            "host": MERGED,
            "upstreams": [{"name": "web", "service": "web", "port": 80}],
            "routes": routes,
        },
    }


def _vsr(namespace: str, name: str, paths: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "VirtualServerRoute",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": "menu"}},
        "spec": {
            "host": MERGED,
            "upstreams": [{"name": "web", "service": "web", "port": 80}],
            "subroutes": [{"path": p, "action": {"pass": "web"}} for p in paths],
        },
    }


def _last(f: Ferryman, kind: str, name: str, namespace: str) -> dict[str, str]:
    events = [
        e for e in f.events_for(name) if (e.get("kind"), e.get("namespace")) == (kind, namespace)
    ]
    return events[-1] if events else {}


def test_a_big_route_without_hostnames_is_refused_alone_on_a_shared_gateway(
    ferryman: Ferryman, backends: Backends
) -> None:
    f = ferryman
    address, port = "127.0.0.10", free_port()
    f.extra_args += [
        "--max-record-bytes",
        str(SMALL_LIMIT),
        "--enable-gateway-api",
        "--gateway-addresses",
        address,
    ]
    f.write("a-svc", service_with_backends("web", [backends.start("a")], namespace="a"))
    f.write("b-svc", service_with_backends("web", [backends.start("b")], namespace="b"))
    f.write("class", _gateway_class(), _shared_gateway(port))
    f.write("small", _route("a", "small", ["a.test"], ["/"]))
    # ~10 kB of matches for any hostname: every record of the listener would be too large.
    f.write("big", _route("b", "big", [], [f"/big/{i:03d}/" + "y" * 80 for i in range(100)]))
    f.start()

    eventually(lambda: _at(address, port, "a.test") == "a", 60, "the small route live")
    assert _at(address, port, "a.test", "/big/000/" + "y" * 80) == "a"  # its own "/"
    message = eventually(lambda: _rejected(f).get("big"), 60, "the big route rejected")
    assert f"more than --max-record-bytes {SMALL_LIMIT}" in message, message
    status = [line for line in f.logs().splitlines() if "status" in line and "name=big" in line]
    assert status and "UnsupportedValue" in status[-1], status

    # Another tenant's new route still goes live.
    f.write("late", _route("a", "late", ["late.test"], ["/"]))
    eventually(lambda: _at(address, port, "late.test") == "a", 60, "a new route live")


def test_a_gateway_record_nginx_refuses_is_reported_on_its_routes(
    ferryman: Ferryman, backends: Backends
) -> None:
    f = ferryman
    address, port = "127.0.0.10", free_port()
    # 1 MiB of record memory, no size cap below it: NGINX's memory is what refuses.
    f.extra_args += ["--records-memory-size", "1m", "--max-record-bytes", "1000000"]
    f.extra_args += ["--enable-gateway-api", "--gateway-addresses", address]
    f.write("a-svc", service_with_backends("web", [backends.start("a")], namespace="a"))
    f.write("b-svc", service_with_backends("web", [backends.start("b")], namespace="b"))
    f.write("class", _gateway_class(), _shared_gateway(port))
    f.write("small", _route("a", "small", ["a.test"], ["/"]))
    # 8 hostnames, each a ~200 kB record: more than the memory holds.
    hog_paths = [f"/hog/{i:03d}/" + "y" * 900 for i in range(200)]
    f.write("hog", _route("b", "hog", [f"h{i}.test" for i in range(8)], hog_paths))
    f.start()

    eventually(lambda: _at(address, port, "a.test") == "a", 60, "the small route live")
    message = eventually(lambda: _rejected(f).get("hog"), 60, "the hog route rejected")
    assert "does not fit in NGINX's record memory (--records-memory-size 1m" in message, message
    status = [line for line in f.logs().splitlines() if "status" in line and "name=hog" in line]
    assert status and "does not fit" in status[-1], status
    f.write("late", _route("a", "late", ["late.test"], ["/"]))
    eventually(lambda: _at(address, port, "late.test") == "a", 60, "a new route live")


def _at(address: str, port: int, host: str, p: str = "/") -> str | None:
    r = httpx.get(f"http://{address}:{port}{p}", headers={"Host": host}, timeout=10)
    return Response(r.status_code, r.headers, r.text).served_by or str(r.status_code)


def _gateway_class() -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "GatewayClass",
        "metadata": {"name": "ferryman"},
        "spec": {"controllerName": "ferryman.io/gateway-controller"},
    }


def _shared_gateway(port: int) -> dict[str, Any]:
    listener = {
        "name": "http",
        "port": port,
        "protocol": "HTTP",
        "allowedRoutes": {"namespaces": {"from": "All"}},
    }
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": "shared", "namespace": "default"},
        "spec": {"gatewayClassName": "ferryman", "listeners": [listener]},
    }


def _route(namespace: str, name: str, hostnames: list[str], paths: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "parentRefs": [{"name": "shared", "namespace": "default"}],
            "hostnames": hostnames,
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": p}} for p in paths],
                    "backendRefs": [{"name": "web", "port": 80}],
                }
            ],
        },
    }
