"""ingress-nginx's default-backend annotation through real NGINX and real
backends: the named Service serves while the path's Service has no endpoint,
and stops when it has one again; no reload
(kinds/ingress/parse/ingress_nginx_backend.py, ferryman.lua's proxy_to)."""

from __future__ import annotations

from testkit.annotated_ingress import HOST, annotated, last
from testkit.harness import Backends, Ferryman, eventually, service_with_backends

P = "nginx.ingress.kubernetes.io/"


def test_the_default_backend_serves_while_the_service_has_no_endpoint(
    ferryman: Ferryman, backends: Backends
) -> None:
    f = ferryman
    app, errors = backends.start("a"), backends.start("errors")
    f.write("svc", service_with_backends("app", []))
    # Its first port is the one served (a second one names no endpoint).
    fallback = service_with_backends("fallback", [errors], port_name="http")
    fallback[0]["spec"]["ports"].append({"name": "other", "port": 81, "protocol": "TCP"})
    f.write("fallback", fallback)
    f.write("doc0", annotated({P + "default-backend": "fallback"}))
    f.start()
    assert last(f)["reason"] == "AddedOrUpdated"
    r = f.get(HOST, "/some/path?x=1")
    assert r.status == 200 and r.served_by == "errors"
    assert r.json()["path"] == "/some/path?x=1"
    # The path's Service gets an endpoint: it serves again (no reload).
    f.write("svc", service_with_backends("app", [app]))
    eventually(lambda: f.get(HOST, "/").served_by == "a", 60, "the Service's own endpoint")
    # Both gone: ingress-nginx's 503.
    f.write("svc", service_with_backends("app", []))
    f.write("fallback", service_with_backends("fallback", [], port_name="http"))
    eventually(lambda: f.get(HOST, "/").status == 503, 60, "503 without endpoints")
    assert f.reloads() == 1


def test_an_unusable_default_backend_is_named_in_a_warning(
    ferryman: Ferryman, backends: Backends
) -> None:
    f = ferryman
    f.write("svc", service_with_backends("app", []))
    f.write("doc0", annotated({P + "default-backend": "other/fallback"}))
    f.start()
    event = last(f)
    assert event["reason"] == "AddedOrUpdatedWithWarning"
    assert (
        f"{P}default-backend: 'other/fallback': ferryman reads a Service of the Ingress's "
        "namespace" in event["message"]
    )
    assert f.get(HOST, "/").status == 503
