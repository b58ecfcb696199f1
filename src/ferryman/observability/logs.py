"""Log set-up: ``text`` (key=value) or ``json`` lines on stderr.

Structured fields travel in ``extra={"fields": {...}}``.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    fields = getattr(record, "fields", None)
    return dict(fields) if isinstance(fields, dict) else {}


def _quote(value: object) -> str:
    text = str(value)
    if text and all(c.isalnum() or c in "-_./:@" for c in text):
        return text
    return json.dumps(text)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        parts = [
            f"{ts}.{int(record.msecs):03d}Z",
            f"level={record.levelname.lower()}",
            f"logger={record.name}",
            f"msg={_quote(record.getMessage())}",
        ]
        parts += [f"{k}={_quote(v)}" for k, v in _fields(record).items()]
        if record.exc_info:
            parts.append(f"error={_quote(self.formatException(record.exc_info))}")
        return " ".join(parts)


class JSONFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        out.update(_fields(record))
        if record.exc_info:
            out["error"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def setup(fmt: str, level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JSONFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # One line per API request (httpx) or per batch of file changes (watchfiles)
    # drowns everything else; failures surface as ours.
    for noisy in ("httpx", "httpx2", "watchfiles"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
