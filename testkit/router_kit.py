"""What the router property tests share (test_router_property, test_vs_router_property,
test_vsr_router_property, test_vs_match_property, and the annotated and guarded
routers of test_ingress_annotations and test_ingress_policies).

A ferryman start costs more than a second, so one ferryman serves every
Hypothesis example of a test: each example rewrites the resources and waits
for a marker path that only the new version routes (unique per example, to a
backend nothing else uses) before it asks NGINX and compares every answer with
the reference's.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

import httpx
from hypothesis import HealthCheck, settings

from testkit.harness import Backends, Ferryman, eventually, service_with_backends

# One ferryman per test (function-scoped fixture) serves all its examples, and
# an example waits for NGINX: neither is a health problem here.
_QUIET = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
_markers = itertools.count()


def examples(n: int) -> settings:
    """Hypothesis settings for ``n`` examples against the one running ferryman."""
    return settings(max_examples=n, deadline=None, suppress_health_check=_QUIET)


class HostClient:
    """Asks one host of a ferryman which backend answers a request."""

    def __init__(self, ferryman: Ferryman, host: str) -> None:
        self._base = f"http://127.0.0.1:{ferryman.http_port}"
        self._host = host
        self._client = httpx.Client(timeout=10)

    def served_by(self, request: str) -> str:
        """The backend's name, or the status when none answered (404, 301...)."""
        return self.ask(request, {"Host": self._host})

    def ask(self, request: str, headers: dict[str, str], **params: str) -> str:
        r = self._client.get(self._base + request, headers=headers, params=params or None)
        return str(r.json()["name"]) if r.status_code == 200 else str(r.status_code)

    def close(self) -> None:
        self._client.close()


C = TypeVar("C", bound=HostClient)


def serve(
    ferryman: Ferryman, backends: Backends, services: Iterable[str], client: C
) -> Iterator[tuple[Ferryman, C]]:
    """A fixture's body (``yield from``): a Service with one echo backend per
    name, ferryman started on what the fixture wrote before, ``client`` closed
    after the test."""
    for name in services:
        ferryman.write(f"svc-{name}", service_with_backends(name, [backends.start(name)]))
    ferryman.start()
    try:
        yield ferryman, client
    finally:
        client.close()


def new_marker() -> str:
    """A path no earlier example routed."""
    return f"/marker-{next(_markers)}"


def await_marker(client: HostClient, marker: str, service: str) -> None:
    """Waits until NGINX routes ``marker`` to ``service``: the example is live."""
    eventually(lambda: client.served_by(marker) == service, 60, f"{marker} live")


def check_answers(
    client: HostClient, checked: list[str], predicted: Callable[[str], str], example: str
) -> list[tuple[str, str, str]]:
    """Asserts that NGINX answers each request as the reference predicts, and
    returns the (request, predicted, answered) triples."""
    answers = [(r, predicted(r), client.served_by(r)) for r in checked]
    wrong = [(r, want, got) for r, want, got in answers if want != got]
    assert not wrong, f"{example}: (request, reference says, NGINX answered) {wrong}"
    return answers
