"""Reloads on both data planes: the start-up reload with nothing served, and a
reload whose listeners cannot bind (reported at once, never ready without them)."""

from __future__ import annotations

import socket
import time

import httpx
import pytest

from testkit.harness import (
    Backends,
    Ferryman,
    eventually,
    ingress,
    path,
    rule,
    served_by,
    service_with_backends,
)

pytestmark = pytest.mark.flavours("nginx", "nginx-1.30", "angie")


def _ready_status(f: Ferryman) -> int:
    try:
        return httpx.get(f"http://127.0.0.1:{f.ready_port}/nginx-ready", timeout=1).status_code
    except httpx.HTTPError:
        return 0


def test_with_nothing_served_unknown_hosts_get_404_from_the_start(
    ferryman: Ferryman, backends: Backends
) -> None:
    ferryman.write("svc", service_with_backends("app", [backends.start("app")]))
    other = ingress("other", [rule("other.test", path("/", "app"))], class_name="another")
    ferryman.write("other", other)
    ferryman.start()
    assert served_by(ferryman, "unknown.test", "/") == "404"
    assert served_by(ferryman, "other.test", "/") == "404"
    assert ferryman.reloads() == 1  # the one start-up reload
    ferryman.write("ing", ingress("late", [rule("late.test", path("/", "app"))]))
    eventually(lambda: served_by(ferryman, "late.test", "/") == "app", 60, "a later Ingress")


def test_listeners_that_cannot_bind_fail_the_reload_at_once_and_keep_not_ready(
    ferryman: Ferryman, backends: Backends
) -> None:
    ferryman.write("svc", service_with_backends("app", [backends.start("app")]))
    ferryman.write("ing", ingress("r", [rule("bind.test", path("/", "app"))]))
    holder = socket.socket()  # another process on the HTTP port
    holder.bind(("0.0.0.0", ferryman.http_port))
    holder.listen()
    try:
        started = time.monotonic()
        ferryman.start(wait=False)
        errors = "nginx_ingress_controller_nginx_reload_errors_total"
        # Far sooner than --nginx-reload-timeout (60 s): the master's own error
        # log says it kept the old configuration (after its 2.5 s of bind retries).
        eventually(lambda: ferryman.metrics()[errors] >= 1, 60, "the failed reload reported")
        assert time.monotonic() - started < 20
        assert ferryman.metrics()["nginx_ingress_controller_nginx_last_reload_status"] == 0
        assert "could not bind()" in ferryman.logs()
        assert 'msg="nginx reload failed"' in ferryman.logs()
        assert _ready_status(ferryman) == 503
        time.sleep(1.5)  # a retry or two, still failing
        assert _ready_status(ferryman) == 503
    finally:
        holder.close()
    # The port is free again: a retry opens the listeners, and only then ready.
    ferryman.wait_ready(45)
    assert served_by(ferryman, "bind.test", "/") == "app"
    assert ferryman.metrics()["nginx_ingress_controller_nginx_last_reload_status"] == 1
