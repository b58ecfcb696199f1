"""ferryman.kube.errors: lightkube's ApiError (a Status answer) and httpx's
status errors (a plain one) become ferryman's own classes, raised from them."""

from __future__ import annotations

import sys
from typing import Any

import httpx
import pytest
from lightkube.core.exceptions import ApiError
from lightkube.core.generic_client import GenericClient

from ferryman.kube.errors import (
    AlreadyExists,
    BadRequest,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    KubeError,
    NotFound,
    Timeout,
    Unavailable,
    from_api,
    mapped,
)

REQUEST = httpx.Request("GET", "https://api.test/api/v1/namespaces/ns/pods/p")


def api_error(code: int, reason: str = "", message: str = "refused") -> ApiError:
    status: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    return ApiError(request=REQUEST, response=httpx.Response(code, json=status, request=REQUEST))


@pytest.mark.parametrize(
    ("code", "reason", "cls"),
    [
        (400, "BadRequest", BadRequest),
        (401, "Unauthorized", Forbidden),
        (403, "Forbidden", Forbidden),
        (404, "NotFound", NotFound),
        (409, "Conflict", Conflict),
        (409, "AlreadyExists", AlreadyExists),
        (410, "Expired", Gone),
        (422, "Invalid", Invalid),
        (429, "TooManyRequests", Unavailable),
        (500, "InternalError", Unavailable),
        (503, "ServiceUnavailable", Unavailable),
        (504, "Timeout", Timeout),
        (418, "", KubeError),
    ],
)
def test_each_status_maps_to_its_class(code: int, reason: str, cls: type[KubeError]) -> None:
    source = api_error(code, reason, "the message")
    with pytest.raises(KubeError) as raised, mapped():
        raise source
    error = raised.value
    assert type(error) is cls
    assert (error.status, error.reason, error.message) == (code, reason, "the message")
    assert str(error) == str(source)
    assert error.__cause__ is source


def test_already_exists_is_a_conflict_and_timeout_unavailable() -> None:
    assert isinstance(from_api(api_error(409, "AlreadyExists")), Conflict)
    assert isinstance(from_api(api_error(504, "Timeout")), Unavailable)


def test_a_plain_404_page_is_not_found() -> None:
    """An API group the server does not serve answers text, not a Status."""
    response = httpx.Response(404, text="404 page not found", request=REQUEST)
    plain = httpx.HTTPStatusError("404 page not found", request=REQUEST, response=response)
    with pytest.raises(NotFound) as raised, mapped():
        raise plain
    assert raised.value.status == 404


def test_lightkubes_own_plain_404_is_not_found() -> None:
    """lightkube raises its HTTP client's status error (not ApiError) for an
    answer that is not JSON: what an API group the server does not serve gets."""
    client_httpx = sys.modules[ApiError.__mro__[1].__module__.partition(".")[0]]
    request = client_httpx.Request("GET", "https://api.test/apis/k8s.nginx.org/v1/policies")
    response = client_httpx.Response(
        404, text="404 page not found", headers={"Content-Type": "text/plain"}, request=request
    )
    with pytest.raises(NotFound) as raised, mapped():
        GenericClient.raise_for_status(response)
    assert raised.value.status == 404
    assert not isinstance(raised.value.__cause__, ApiError)


def test_a_status_without_a_message_keeps_the_message_empty() -> None:
    error = from_api(api_error(404, "NotFound", ""))
    assert isinstance(error, NotFound)
    assert error.message == ""


def test_other_errors_pass_unchanged() -> None:
    """Connection failures are no answer of the API server: retried as they are."""
    refused = httpx.ConnectError("connection refused", request=REQUEST)
    assert from_api(refused) is None
    with pytest.raises(httpx.ConnectError), mapped():
        raise refused
