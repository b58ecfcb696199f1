"""What NGINX says, read: its error log's lines, ``nginx -t``'s refusal and the
push handler's answer.

Apart from ``nginx.py``, which runs the process, because these are pure
readings of text (the level ferryman logs a line at, whether a line is the
master's failure to load a new configuration, the files a test's message
names, the version and refusals a push answer carries), testable without an
NGINX.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from ferryman.dataplane import PushResult
from ferryman.wire.records import RecordKey

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.DEBUG,  # start/reload chatter; the level stays in the text
    "warn": logging.WARNING,
    "error": logging.ERROR,
    "crit": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emerg": logging.CRITICAL,
}
_LEVEL_RE = re.compile(r"\[(debug|info|notice|warn|error|crit|alert|emerg)\]")
# NGINX logs every failed attempt at a peer as an error, also when the next peer
# then answered (proxy_next_upstream retries errors and timeouts before the
# response starts): the line cannot tell, so an attempt is a warning; what the
# client got is the request's status (--enable-latency-metrics counts 502/504s).
# "no live upstreams" (no peer left to try) stays an error, as do failures after
# the response began ("while reading upstream"), which nothing retries.
_ATTEMPT_RE = re.compile(
    r"while (?:connecting to|sending request to|reading response header from|"
    r"SSL handshaking to) upstream"
)
# The master's own [emerg] lines: after a HUP, the new configuration failed to load
# (the master keeps the old one and says nothing else). A failed bind() is retried
# by the master itself (5 times, 500 ms apart) and only its last word, "still
# could not bind()", is the failure.
_MASTER_EMERG_RE = re.compile(r"\[emerg\] (\d+)#")
_BIND_RETRIED_RE = re.compile(r"\] \d+#\d+: bind\(\) to \S+ failed")
# Which port: "bind() to 0.0.0.0:8080 failed (98: Address already in use)".
_BIND_RE = re.compile(r"\[emerg\] (\d+)#\d+: bind\(\) to \S*:(\d+) failed \((?:\d+: )?([^)]*)\)")


def level_of(line: str) -> int:
    """The level ferryman logs a line of NGINX's error log at."""
    m = _LEVEL_RE.search(line)
    level = _LEVELS[m.group(1)] if m else logging.INFO
    if level == logging.ERROR and _ATTEMPT_RE.search(line) and "no live upstreams" not in line:
        return logging.WARNING
    return level


def master_failure(line: str, master: int) -> bool:
    """``line`` is the master ``master``'s word that a new configuration failed to
    load (not a bind() it retries by itself)."""
    m = _MASTER_EMERG_RE.search(line)
    return m is not None and int(m.group(1)) == master and not _BIND_RETRIED_RE.search(line)


def bind_failure(line: str, master: int) -> tuple[int, str] | None:
    """The port the master ``master`` could not bind and NGINX's reason, when
    ``line`` says so: the culprit of a reload that then fails."""
    m = _BIND_RE.search(line)
    if m is None or int(m.group(1)) != master:
        return None
    return int(m.group(2)), m.group(3)


def culprits_in(message: str, state_dir: Path) -> tuple[str, ...]:
    """Files under the state dir that an ``nginx -t`` message points at."""
    found = []
    prefix = str(state_dir) + "/"
    for m in re.finditer(r" in (\S+?):\d+", message):
        if m.group(1).startswith(prefix):
            found.append(m.group(1)[len(prefix) :])
    return tuple(dict.fromkeys(found))


def parse_push_answer(text: str) -> PushResult | None:
    """The push handler's answer (ferryman.lua): the version, the fill ratio of
    each store (``M``) and the records it refused (``R``); None when malformed."""
    lines = text.splitlines()
    if not lines or not lines[0].isdigit():
        return None
    memory: dict[str, float] = {}
    refused: dict[RecordKey, str] = {}
    for line in lines[1:]:
        fields = line.split("\t")
        try:
            if fields[0] == "M" and len(fields) == 3:
                memory[fields[1]] = float(fields[2])
            elif fields[0] == "R" and len(fields) == 4:
                refused[(fields[1], fields[2])] = fields[3]
            else:
                return None
        except ValueError:
            return None
    return PushResult(int(lines[0]), refused, memory)
