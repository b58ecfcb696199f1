"""ingress-nginx's limit-connections and limit-allowlist (limit-whitelist) through
real NGINX and real backends: the answers clients see, the Events, and no
reload (kinds/ingress/parse/ingress_nginx_limits.py, records/limit_conn.py,
dataplane/lua/ferryman_policy_conn.lua)."""

from __future__ import annotations

import threading

import pytest

from testkit.annotated_ingress import HOST, annotated, last
from testkit.harness import Backend, Backends, Ferryman, eventually, service_with_backends

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


@pytest.mark.flavours("nginx", "nginx-1.30", "angie-lua", "angie")
def test_limit_connections_answers_503_to_one_request_too_many(
    ferryman: Ferryman, backends: Backends
) -> None:
    """Two requests of one client held open: a third is ingress-nginx's 503 at
    once; once they are answered, the client's count is back and it is served.
    On Angie (no Lua slow path) the limit is not applied, said in a Warning."""
    f = ferryman
    b = _start(f, backends, {P + "limit-connections": "2"})
    threads, statuses = _held(f, b, 2)
    if f.data_plane == "angie":
        event = last(f)
        assert event["reason"] == "AddedOrUpdatedWithWarning"
        assert "limit-connections and limit-allowlist" in event["message"]
        assert f.get(HOST, "/").status == 200
        b.release()
        for t in threads:
            t.join(30)
        return
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
