"""NGINX's error log in ferryman's: the level each line is logged at."""

from __future__ import annotations

import logging

import pytest

from ferryman.dataplane.nginx_messages import level_of

PREFIX = "2026/11/23 12:00:00 [{level}] 10#10: *7 "
TAIL = ', client: 127.0.0.1, server: _, request: "GET / HTTP/1.1", upstream: "http://10.0.0.1:80/"'


@pytest.mark.parametrize(
    ("level", "message", "logged"),
    [
        # An attempt at one peer; NGINX may have answered from the next one.
        ("error", "connect() failed (111: Connection refused) while connecting to upstream",
         logging.WARNING),
        ("error", "upstream timed out (110: Connection timed out) while connecting to upstream",
         logging.WARNING),
        ("error", "recv() failed (104: Connection reset by peer) while reading response header "
         "from upstream", logging.WARNING),
        ("error", "upstream prematurely closed connection while reading response header from "
         "upstream", logging.WARNING),
        ("error", "writev() failed (32: Broken pipe) while sending request to upstream",
         logging.WARNING),
        # No peer left, or the response had begun: the client got the failure.
        ("error", "no live upstreams while connecting to upstream", logging.ERROR),
        ("error", "upstream prematurely closed connection while reading upstream", logging.ERROR),
        ("error", 'open() "/x" failed (2: No such file or directory)', logging.ERROR),
        ("warn", "an upstream response is buffered to a temporary file", logging.WARNING),
        ("crit", "connect() to unix:/x failed while connecting to upstream", logging.CRITICAL),
        ("notice", "signal process started", logging.DEBUG),
    ],
)  # fmt: skip
def test_upstream_attempts_are_warnings(level: str, message: str, logged: int) -> None:
    assert level_of(PREFIX.format(level=level) + message + TAIL) == logged


def test_a_line_without_a_level_is_info() -> None:
    assert level_of("nginx: the configuration file /x syntax is ok") == logging.INFO
