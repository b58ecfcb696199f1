"""ingress-nginx's custom-http-errors with default-backend through real NGINX and
real backends: the listed codes of the upstream's and NGINX's own responses are
answered by the default backend, told what happened in ingress-nginx's headers;
other codes pass as the upstream sent them; a change reloads nothing
(kinds/ingress/parse/ingress_nginx_backend.py, ferryman_custom_errors.lua,
ngx_http_ferryman_errors.c)."""

from __future__ import annotations

import pytest

from testkit.annotated_ingress import HOST, annotated, last
from testkit.harness import Backends, Ferryman, eventually, in_flight, service_with_backends

P = "nginx.ingress.kubernetes.io/"

pytestmark = pytest.mark.flavours("nginx", "nginx-1.30", "angie")


def _errors(codes: str) -> dict[str, str]:
    return {P + "default-backend": "fallback", P + "custom-http-errors": codes}


def test_listed_codes_are_answered_by_the_default_backend(
    ferryman: Ferryman, backends: Backends
) -> None:
    f = ferryman
    app, errors = backends.start("a"), backends.start("errors")
    f.write("svc", service_with_backends("app", [app]))
    f.write("fallback", service_with_backends("fallback", [errors]))
    f.write("doc0", annotated(_errors("404, 503")))
    f.start()
    assert last(f)["reason"] == "AddedOrUpdated"

    r = f.get(HOST, "/missing?status=404", headers={"Accept": "text/html", "X-Request-ID": "r1"})
    # The default backend's answer is the client's, status included (ingress-nginx's
    # "error_page 404 = @custom_..."): the echo backend says 200.
    assert (r.status, r.served_by) == (200, "errors")
    seen = r.json()
    assert (seen["method"], seen["path"]) == ("GET", "/")
    headers = seen["headers"]
    assert {k: headers.get(k.lower()) for k in _TOLD} == {
        "X-Code": "404",
        "X-Format": "text/html",
        "X-Original-URI": "/missing?status=404",
        "X-Namespace": "default",
        "X-Ingress-Name": "ann",
        "X-Service-Name": "app",
        "X-Service-Port": "80",
        "X-Request-ID": "r1",
    }
    # A POST's error too, asked as GET without the body.
    r = f.get(HOST, "/p?status=503", method="POST", content=b"payload")
    assert (r.served_by, r.json()["method"], r.json()["body"]) == ("errors", "GET", "")
    # Codes not listed are the upstream's own.
    r = f.get(HOST, "/other?status=500")
    assert (r.status, r.served_by) == (500, "a")
    assert f.get(HOST, "/fine").served_by == "a"
    # The intercepted attempts are not left counted in flight (a drain waits on it).
    eventually(lambda: in_flight(f).peers.get(f"127.0.0.1:{app.port}", 0) == 0, 30, "in flight")

    # Another set of codes: a push, no reload.
    f.write("doc0", annotated(_errors("500")))
    eventually(lambda: f.get(HOST, "/other?status=500").served_by == "errors", 60, "500 listed")
    r = f.get(HOST, "/missing?status=404")
    assert (r.status, r.served_by) == (404, "a")
    # Without the annotation: nothing intercepted.
    f.write("doc0", annotated({P + "default-backend": "fallback"}))
    eventually(lambda: f.get(HOST, "/other?status=500").status == 500, 60, "none listed")
    assert f.reloads() == 1


_TOLD = (
    "X-Code",
    "X-Format",
    "X-Original-URI",
    "X-Namespace",
    "X-Ingress-Name",
    "X-Service-Name",
    "X-Service-Port",
    "X-Request-ID",
)


def test_nginx_s_own_errors_go_to_the_default_backend_too(
    ferryman: Ferryman, backends: Backends
) -> None:
    """A 502 (no peer answers) listed is the default backend's; one with no
    endpoint of its own keeps NGINX's page."""
    f = ferryman
    gone, errors = backends.start("gone"), backends.start("errors")
    gone.server.shutdown()
    gone.server.server_close()
    f.write("svc", service_with_backends("app", [gone]))
    f.write("fallback", service_with_backends("fallback", [errors]))
    f.write("doc0", annotated(_errors("502")))
    f.start()
    r = f.get(HOST, "/x")
    assert r.served_by == "errors"
    assert r.json()["headers"]["x-code"] == "502"
    f.write("fallback", service_with_backends("fallback", []))
    eventually(lambda: f.get(HOST, "/x").status == 502, 60, "NGINX's 502")
    assert "<h1>502 Bad Gateway</h1>" in f.get(HOST, "/x").text  # the server's own page
    assert f.reloads() == 1


@pytest.mark.flavours("nginx")
@pytest.mark.parametrize(
    ("annotations", "warning"),
    [
        (
            {P + "custom-http-errors": "404"},
            f"annotation {P}custom-http-errors is not applied: it needs {P}default-backend",
        ),
        (_errors("404,abc"), "'404,abc' is not a list of status codes: not applied"),
        (_errors("302"), "'302': codes are 400-599: not applied"),
    ],
)
def test_unusable_codes_are_named_in_a_warning(
    ferryman: Ferryman, backends: Backends, annotations: dict[str, str], warning: str
) -> None:
    f = ferryman
    f.write("svc", service_with_backends("app", [backends.start("a")]))
    f.write("fallback", service_with_backends("fallback", [backends.start("errors")]))
    f.write("doc0", annotated(annotations))
    f.start()
    event = last(f)
    assert event["reason"] == "AddedOrUpdatedWithWarning"
    assert warning in event["message"]
    r = f.get(HOST, "/x?status=404")
    assert (r.status, r.served_by) == (404, "a")
