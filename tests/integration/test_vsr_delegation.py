"""VirtualServerRoutes through real NGINX: a VirtualServer's route hands its path
to the subroutes of a VirtualServerRoute (by name, across namespaces, by label
selector), with NGINX's location precedence, each VirtualServerRoute's upstreams
resolved in its own namespace, NIC's rules and texts for missing, invalid and
unreferenced ones, and no reload for any change."""

from __future__ import annotations

from typing import Any

from testkit.harness import (
    Backends,
    BrokenBackend,
    Ferryman,
    eventually,
    served_by,
    service_with_backends,
)
from testkit.vsr_delegation import HOST, answer, vs, vsr


def up(name: str, service: str | None = None) -> dict[str, Any]:
    return {"name": name, "service": service or name, "port": 80}


def to(upstream: str) -> dict[str, Any]:
    return {"pass": upstream}


def last(f: Ferryman, kind: str, name: str, namespace: str = "default") -> dict[str, str]:
    events = [
        e for e in f.events_for(name) if e.get("kind") == kind and e.get("namespace") == namespace
    ]
    return events[-1] if events else {}


def body(f: Ferryman, p: str) -> str:
    r = f.get(HOST, p)
    return r.text if r.status == 200 else str(r.status)


def test_delegation_by_name_across_namespaces_and_by_selector(
    ferryman: Ferryman, backends: Backends
) -> None:
    f = ferryman
    # One Service name in three namespaces, three different backends: each
    # VirtualServerRoute's upstream is its own namespace's.
    for ns in ("default", "tea", "coffee"):
        f.write(f"web-{ns}", service_with_backends("web", [backends.start(ns)], namespace=ns))
    f.write(
        "vs",
        vs(
            [
                {"path": "/", "action": to("web")},
                {"path": "/tea", "route": "tea/tea"},
                {"path": "/local", "route": "local"},
                {"path": "/menu", "routeSelector": {"matchLabels": {"app": "menu"}}},
            ],
            [up("web")],
        ),
    )
    f.write("tea", vsr("tea", [{"path": "/tea", "action": to("t")}], [up("t", "web")], "tea"))
    f.write("local", vsr("local", [{"path": "/local", "action": to("l")}], [up("l", "web")]))
    for ns in ("tea", "coffee"):
        subroutes = [{"path": f"/menu/{ns}", "action": to("m")}]
        f.write(f"m-{ns}", vsr("menu", subroutes, [up("m", "web")], ns, labels={"app": "menu"}))
    f.start()
    expected = {
        "/": "default",
        "/tea": "tea",
        "/tea/green": "tea",
        "/local": "default",
        "/menu/tea": "tea",
        "/menu/coffee": "coffee",
        "/menu/other": "default",  # no subroute: the VS's "/"
    }
    for p, want in expected.items():
        assert served_by(f, HOST, p) == want, p
    vs_event = last(f, "VirtualServer", "cafe")
    assert (vs_event["reason"], vs_event["message"]) == (
        "AddedOrUpdated",
        "Configuration for default/cafe was added or updated ",
    )
    for ns, name in (("tea", "tea"), ("default", "local"), ("coffee", "menu")):
        e = last(f, "VirtualServerRoute", name, ns)
        assert (e["type"], e["reason"], e["message"]) == (
            "Normal",
            "AddedOrUpdated",
            f"Configuration for {ns}/{name} was added or updated",
        )
    assert f.reloads() == 1


def test_subroutes_follow_nginx_location_precedence(ferryman: Ferryman, backends: Backends) -> None:
    f = ferryman
    f.write(
        "vs",
        vs(
            [
                {"path": "~ ^/api/v", "route": "api"},  # first here, yet after the VS's own
                {"path": "~ ^/api", "action": answer("vs regex")},
                {"path": "/img", "route": "img"},
                {"path": "~ \\.png$", "action": answer("vs png")},
                {"path": "=/exact", "route": "exact"},
                {"path": "^~ /static", "route": "static"},
                {"path": "/", "action": answer("vs root")},
            ]
        ),
    )
    f.write("api", vsr("api", [{"path": "~ ^/api/v", "action": answer("vsr api")}]))
    img = [
        {"path": "/img", "action": answer("vsr img")},
        {"path": "/img/one", "action": answer("vsr one")},
    ]
    f.write("img", vsr("img", img))
    static = [
        {"path": "^~ /static", "action": answer("vsr static")},
        {"path": "^~ /static/deep", "action": answer("vsr deep")},
    ]
    f.write("static", vsr("static", static))
    f.write("exact", vsr("exact", [{"path": "=/exact", "action": answer("vsr exact")}]))
    f.start()
    expected = {
        "/api/v1": "vs regex",  # NIC writes the subroutes' locations after the VS's
        "/img/a": "vsr img",
        "/img/a.png": "vs png",  # a regex beats a subroute's prefix
        "/img/one/x": "vsr one",  # the longest prefix
        "/static/a.png": "vsr static",  # ^~ in a subroute stops the regexes
        "/static/deep/a.png": "vsr deep",
        "/exact": "vsr exact",
        "/exact/more": "vs root",  # an exact delegation is exact only
    }
    for p, want in expected.items():
        assert body(f, p) == want, p
    assert f.reloads() == 1


def test_changes_to_virtual_server_routes_never_reload(
    ferryman: Ferryman, backends: Backends
) -> None:
    f = ferryman
    for name in ("a", "b"):
        f.write(f"svc-{name}", service_with_backends(name, [backends.start(name)]))
    f.write("vs", vs([{"path": "/tea", "route": "tea"}]))
    f.start()
    # Missing: NIC's warning, and the path has no location (404).
    assert served_by(f, HOST, "/tea") == "404"
    e = last(f, "VirtualServer", "cafe")
    assert (e["reason"], e["message"]) == (
        "AddedOrUpdatedWithWarning",
        "Configuration for default/cafe was added or updated with warning(s): "
        "VirtualServerRoute default/tea doesn't exist or invalid",
    )
    f.write("tea", vsr("tea", [{"path": "/tea", "action": to("a")}], [up("a")]))
    eventually(lambda: served_by(f, HOST, "/tea") == "a", 60, "created")
    # The gauges are set after the push that serves (engine/controller.py's flush).
    gauge = "nginx_ingress_controller_virtualserverroute_resources_total"
    eventually(lambda: f.metrics()[gauge] == 1, 60, "the route counted")
    eventually(lambda: last(f, "VirtualServer", "cafe")["reason"] == "AddedOrUpdated", 60, "ok")
    f.write("tea", vsr("tea", [{"path": "/tea", "action": to("b")}], [up("b")]))
    eventually(lambda: served_by(f, HOST, "/tea") == "b", 60, "edited")
    f.remove("tea")
    eventually(lambda: served_by(f, HOST, "/tea") == "404", 60, "deleted")
    e = last(f, "VirtualServer", "cafe")
    assert e["message"].endswith("VirtualServerRoute default/tea doesn't exist or invalid")
    # A selector picks up a VirtualServerRoute created later, and lets it go
    # when its labels change.
    f.write("vs", vs([{"path": "/tea", "routeSelector": {"matchLabels": {"team": "tea"}}}]))
    labelled = vsr("tea", [{"path": "/tea", "action": to("a")}], [up("a")], labels={"team": "tea"})
    f.write("tea", labelled)
    eventually(lambda: served_by(f, HOST, "/tea") == "a", 60, "selected")
    labelled["metadata"]["labels"] = {"team": "other"}
    f.write("tea", labelled)
    eventually(lambda: served_by(f, HOST, "/tea") == "404", 60, "unselected")
    assert f.reloads() == 1  # the start-up reload only


def test_invalid_and_unreferenced_virtual_server_routes(
    ferryman: Ferryman, backends: Backends
) -> None:
    f = ferryman
    f.write("svc-a", service_with_backends("a", [backends.start("a")]))
    f.write(
        "vs",
        vs(
            [
                {"path": "/bad", "route": "bad"},
                {"path": "/elsewhere", "route": "elsewhere"},
                {"path": "/outside", "route": "outside"},
                {"path": "/ok", "route": "ok"},
            ]
        ),
    )
    # Invalid on its own: an action naming no upstream.
    f.write("bad", vsr("bad", [{"path": "/bad", "action": to("missing")}]))
    # Valid, but fails the check against the VS: another host, a path outside.
    f.write(
        "elsewhere",
        vsr("elsewhere", [{"path": "/elsewhere", "action": to("a")}], [up("a")], host="other.test"),
    )
    f.write("outside", vsr("outside", [{"path": "/out", "action": to("a")}], [up("a")]))
    f.write("ok", vsr("ok", [{"path": "/ok", "action": to("a")}], [up("a")]))
    # Referenced by no VirtualServer.
    f.write(
        "orphan", vsr("orphan", [{"path": "/x", "action": to("a")}], [up("a")], host="nobody.test")
    )
    f.write("ignored", vsr("ignored", [{"path": "/x", "action": to("a")}], [up("a")]))
    f.start()
    for p in ("/bad", "/elsewhere", "/outside", "/out"):
        assert served_by(f, HOST, p) == "404", p
    assert served_by(f, HOST, "/ok") == "a"
    e = last(f, "VirtualServer", "cafe")
    assert (e["type"], e["reason"], e["message"]) == (
        "Warning",
        "AddedOrUpdatedWithWarning",
        "Configuration for default/cafe was added or updated with warning(s): "
        "VirtualServerRoute default/bad doesn't exist or invalid; "
        "VirtualServerRoute default/elsewhere is invalid: spec.host: Invalid value: "
        "\"other.test\": must be equal to 'cafe.test'; "
        "VirtualServerRoute default/outside is invalid: spec.subroutes[0].path: "
        "Invalid value: \"/out\": must start with '/outside'",
    )
    want = {
        "bad": (
            "Rejected",
            "VirtualServerRoute default/bad was rejected with error: "
            'spec.subroutes[0].action.pass: Not found: "missing"',
        ),
        "elsewhere": ("NoVirtualServerFound", "VirtualServer is invalid or doesn't exist"),
        "outside": ("Ignored", "VirtualServer default/cafe ignores VirtualServerRoute"),
        "orphan": ("NoVirtualServerFound", "VirtualServer is invalid or doesn't exist"),
        "ignored": ("Ignored", "VirtualServer default/cafe ignores VirtualServerRoute"),
        "ok": ("AddedOrUpdated", "Configuration for default/ok was added or updated"),
    }
    for name, (reason, message) in want.items():
        e = last(f, "VirtualServerRoute", name)
        assert (e["reason"], e["message"]) == (reason, message), name
    # The VS leaves: the VirtualServerRoutes it served wait for one.
    f.remove("vs")
    eventually(
        lambda: last(f, "VirtualServerRoute", "ok")["reason"] == "NoVirtualServerFound",
        60,
        "orphaned",
    )
    assert last(f, "VirtualServerRoute", "ignored")["reason"] == "NoVirtualServerFound"
    assert f.reloads() == 1


def test_subroutes_inherit_the_delegating_routes_error_pages(ferryman: Ferryman) -> None:
    f = ferryman
    broken = BrokenBackend()
    f.write("svc-broken", service_with_backends("broken", [broken]))
    pages = [{"codes": [502], "return": {"code": 200, "body": "vs page"}}]
    f.write("vs", vs([{"path": "/s", "route": "s", "errorPages": pages}]))
    subroutes = [
        {"path": "/s/inherit", "action": to("broken")},
        {
            "path": "/s/own",
            "action": to("broken"),
            "errorPages": [{"codes": [502], "return": {"code": 200, "body": "own page"}}],
        },
    ]
    f.write("s", vsr("s", subroutes, [up("broken")]))
    try:
        f.start()
        assert body(f, "/s/inherit") == "vs page"
        assert body(f, "/s/own") == "own page"
    finally:
        broken.close()
