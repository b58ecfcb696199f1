"""The API's errors as ferryman's own, raised ``from`` lightkube's in one place.

::

    KubeError                 .status (HTTP code, 0 none), .reason, .message
    ├── NotFound              404
    ├── Conflict              409: a resourceVersion or precondition did not hold
    │   └── AlreadyExists     409 with reason AlreadyExists: a create lost
    ├── Gone                  410: a watch's resourceVersion was compacted
    ├── Forbidden             403 (and 401)
    ├── BadRequest            400: the request is malformed
    ├── Invalid               422: the object is invalid
    └── Unavailable           429, 5xx
        └── Timeout           504, reason Timeout

Callers catch these, not status codes (kopf's ``_cogs/clients/errors.py``).
Connection failures (httpx's transport errors) pass as they are: the callers
that retry catch ``Exception`` for them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from lightkube.core.exceptions import ApiError


def _status_error(e: BaseException) -> bool:
    """An HTTP client's status error: ``ApiError``, or its base (the status
    error of the client lightkube is built on: a fork of httpx, not httpx
    itself, in some lightkube releases; raised when the answer is not a Status,
    a plain "404 page not found"), or httpx's own. Known by name: httpx is no
    dependency of ferryman's, and the fork's module name changes with releases."""
    return any(c.__name__ == "HTTPStatusError" for c in type(e).__mro__) and hasattr(e, "response")


class KubeError(Exception):
    """The API server refused a request."""

    def __init__(
        self, text: str, *, status: int = 0, reason: str = "", message: str | None = None
    ) -> None:
        """``text``: what ``str`` gives (the library's error's); ``message``: the
        API server's own message ("" none), ``text`` unless told."""
        super().__init__(text)
        self.message = text if message is None else message
        self.status = status
        self.reason = reason


class NotFound(KubeError):
    """404: the object, or the resource (a CRD not installed), is not there."""


class Conflict(KubeError):
    """409: written against an older resourceVersion, or a precondition failed."""


class AlreadyExists(Conflict):
    """409 AlreadyExists: a create found the name taken."""


class Gone(KubeError):
    """410: the resourceVersion a watch started from is no longer held."""


class Forbidden(KubeError):
    """401, 403: RBAC (or credentials) do not allow it."""


class BadRequest(KubeError):
    """400: the request is malformed; a retry fails alike."""


class Invalid(KubeError):
    """422: the object is invalid (or changes an immutable field); a retry fails alike."""


class Unavailable(KubeError):
    """429, 5xx: the API server is overloaded or failing; a retry may succeed."""


class Timeout(Unavailable):
    """504 (reason Timeout): the server gave up on the request."""


_BY_STATUS: dict[int, type[KubeError]] = {
    400: BadRequest,
    401: Forbidden,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Invalid,
    429: Unavailable,
    504: Timeout,
}


def classify(status: int, reason: str = "") -> type[KubeError]:
    """The class of an answer with HTTP ``status`` and the Status's ``reason``."""
    if status == 409 and reason == "AlreadyExists":
        return AlreadyExists
    if (cls := _BY_STATUS.get(status)) is not None:
        return cls
    return Unavailable if status >= 500 else KubeError


def from_api(e: Exception) -> KubeError | None:
    """``e`` as ferryman's error; None when it is no answer of the API server
    (a connection failure, or anything else)."""
    if isinstance(e, KubeError):
        return e
    if isinstance(e, ApiError):
        s = e.status
        code = s.code or (e.response.status_code if e.response is not None else 0)
        reason = s.reason or ""
        return classify(code, reason)(str(e), status=code, reason=reason, message=s.message or "")
    if _status_error(e):
        # Not a Status: the plain "404 page not found" an unknown API group gets.
        code = int(getattr(getattr(e, "response", None), "status_code", 0) or 0)
        return classify(code)(str(e), status=code)
    return None


@contextlib.contextmanager
def mapped() -> Iterator[None]:
    """Raises ferryman's ``KubeError`` for the API's errors in its body."""
    try:
        yield
    except Exception as e:
        if (error := from_api(e)) is None:
            raise
        if error is e:
            raise
        raise error from e
