"""creationTimestamp as text in one form (resources/meta.py), so text order is time order."""

from __future__ import annotations

import datetime

import pytest

from ferryman.resources.meta import parse_meta


def stamp(ts: object) -> str | None:
    return parse_meta({"metadata": {"name": "a", "creationTimestamp": ts}}).creation_timestamp


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("2024-01-02T03:04:05Z", "2024-01-02T03:04:05Z"),  # the API server's own form
        ("2024-01-02T03:04:05+01:00", "2024-01-02T02:04:05Z"),
        ("2024-01-02T03:04:05.5Z", "2024-01-02T03:04:05Z"),
        ("2024-13-02T03:04:05Z", "2024-13-02T03:04:05Z"),  # not a time: kept as it is
        ("yesterday", "yesterday"),
        (datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.UTC), "2024-01-02T03:04:05Z"),
        (datetime.date(2024, 1, 2), "2024-01-02T00:00:00Z"),
        ("", None),
    ],
)
def test_timestamps_become_api_text(given: object, kept: str | None) -> None:
    assert stamp(given) == kept
