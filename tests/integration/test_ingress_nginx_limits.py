"""ingress-nginx's limit-connections and limit-allowlist (limit-whitelist) through
real NGINX and real backends: the answers clients see, the Events, and no
reload (kinds/ingress/parse/ingress_nginx_limits.py, records/limit_conn.py,
dataplane/lua/ferryman_policy_conn.lua)."""

from __future__ import annotations

import base64
import threading
from typing import Any

import grpc
import pytest

from testkit.annotated_ingress import HOST, annotated, last
from testkit.grpc_greeter import Greeter, say_hello, status_of
from testkit.harness import (
    Backend,
    Backends,
    Ferryman,
    eventually,
    path,
    service_with_backends,
    tls_secret,
)

P = "nginx.ingress.kubernetes.io/"


def _start(f: Ferryman, backends: Backends, annotations: dict[str, str]) -> Backend:
    b = backends.start("a")
    f.write("svc", service_with_backends("app", [b]))
    f.write("doc0", annotated(annotations))
    f.start()
    return b


def _held(f: Ferryman, b: Backend, count: int) -> tuple[list[threading.Thread], list[int]]:
    """``count`` requests held open by the backend (all of them reached it)."""
    statuses: list[int] = []
    threads = [
        threading.Thread(target=lambda: statuses.append(f.get(HOST, "/?hold").status))
        for _ in range(count)
    ]
    for t in threads:
        t.start()
    eventually(lambda: b.holding == count, 30, f"{count} requests held")
    return threads, statuses


@pytest.mark.flavours("nginx", "nginx-1.30", "angie")
def test_limit_connections_answers_503_to_one_request_too_many(
    ferryman: Ferryman, backends: Backends
) -> None:
    """Two requests of one client held open: a third is ingress-nginx's 503 at
    once; once they are answered, the client's count is back and it is served."""
    f = ferryman
    b = _start(f, backends, {P + "limit-connections": "2"})
    threads, statuses = _held(f, b, 2)
    assert last(f)["reason"] == "AddedOrUpdated"
    assert f.get(HOST, "/").status == 503
    assert f.get(HOST, "/other").status == 503  # per client, whatever the URI
    b.release()
    for t in threads:
        t.join(30)
    assert statuses == [200, 200]
    assert [f.get(HOST, "/").status for _ in range(5)] == [200] * 5
    assert f.reloads() == 1


def test_the_allow_list_exempts_its_clients_from_every_limit(
    ferryman: Ferryman, backends: Backends
) -> None:
    """limit-rpm 1 (burst 1) and limit-connections 1: a client outside the allow
    list is limited by both; with its address added (an edit, no reload), by
    neither; the older name limit-whitelist reads the same."""
    f = ferryman
    limits = {P + "limit-rpm": "1", P + "limit-burst-multiplier": "1", P + "limit-connections": "1"}
    b = _start(f, backends, {**limits, P + "limit-allowlist": "10.0.0.0/8"})
    assert last(f)["reason"] == "AddedOrUpdated"
    assert [f.get(HOST, "/").status for _ in range(3)] == [200, 200, 503]
    f.write("doc0", annotated({**limits, P + "limit-whitelist": "10.0.0.0/8, 127.0.0.1"}))
    eventually(lambda: f.get(HOST, "/").status == 200, 60, "the client exempt")
    assert [f.get(HOST, "/").status for _ in range(5)] == [200] * 5
    # Three at once: limit-connections 1 does not apply either.
    threads, statuses = _held(f, b, 3)
    assert f.get(HOST, "/").status == 200
    b.release()
    for t in threads:
        t.join(30)
    assert statuses == [200, 200, 200]
    assert f.reloads() == 1


def test_unusable_values_are_named_in_a_warning_and_not_applied(
    ferryman: Ferryman, backends: Backends
) -> None:
    f = ferryman
    _start(
        f,
        backends,
        {
            P + "limit-connections": "lots",
            P + "limit-rps": "1",
            P + "limit-burst-multiplier": "1",
            P + "limit-allowlist": "127.0.0.1,localhost",
        },
    )
    event = last(f)
    assert event["reason"] == "AddedOrUpdatedWithWarning"
    message = event["message"]
    assert f"{P}limit-connections: 'lots' must be a whole number from 0 to 65535" in message
    assert f"{P}limit-allowlist: '127.0.0.1,localhost': 'localhost' is not an address" in message
    # Served, with every client limited (the allow list not applied).
    assert [f.get(HOST, "/").status for _ in range(3)] == [200, 200, 503]
    assert f.reloads() == 1


def test_a_grpc_error_page_gives_the_count_back(ferryman: Ferryman) -> None:
    """limit-connections 1 on a gRPC Ingress whose greeter is down: each call is
    answered UNAVAILABLE by the gRPC error location (an internal redirect, which
    drops ngx.ctx); the counts are given back there, so once a greeter is up the
    client's next call is served, not refused as over its limit."""
    f = ferryman
    down, up = Greeter("down"), Greeter("up")
    down.close()  # its port now refuses connections
    try:
        f.extra_args += ["--nginx-configmaps", "default/nginx-config"]
        md = {"name": "nginx-config", "namespace": "default"}
        f.write(
            "configmap",
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": md, "data": {"http2": "true"}},
        )
        secret = tls_secret("grpc-tls", [HOST])
        f.write("secret", secret)
        root = base64.b64decode(secret["data"]["tls.crt"])
        f.write("svc", service_with_backends("app", [down], port=50051))  # type: ignore[list-item]
        grpc_ingress = {P + "backend-protocol": "GRPC", P + "limit-connections": "1"}
        doc = annotated(grpc_ingress, path("/", "app", port=50051))
        doc["spec"]["tls"] = [{"hosts": [HOST], "secretName": "grpc-tls"}]
        f.write("doc0", doc)
        f.start()
        for _ in range(3):
            assert status_of(f.https_port, HOST, root) == (
                grpc.StatusCode.UNAVAILABLE,
                "unavailable",
            )
        f.write("svc", service_with_backends("app", [up], port=50051))  # type: ignore[list-item]
        answer = eventually(lambda: _answer(f, root), 60, "SayHello answered")
        assert answer["name"] == "up"
        assert f.reloads() == 1
    finally:
        up.close()


def _answer(f: Ferryman, root: bytes) -> dict[str, Any] | None:
    try:
        return say_hello(f.https_port, HOST, root)
    except grpc.RpcError:
        return None
