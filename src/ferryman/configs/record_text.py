"""How user strings travel inside records: base64 (the record grammar's
separators can then never appear in a value), and the unquoting NGINX applies
to a quoted string in its configuration (NIC writes the value into nginx.conf;
ferryman hands the data plane what NGINX would have read)."""

from __future__ import annotations

import base64


def b64(text: str | bytes) -> str:
    raw = text.encode() if isinstance(text, str) else text
    return base64.b64encode(raw).decode("ascii")


def b64_or_dash(text: str) -> str:
    """A record field that may be empty: "-" for none (an F record's texts)."""
    return b64(text) if text else "-"


_ESCAPES = {'"': '"', "'": "'", "\\": "\\", "t": "\t", "r": "\r", "n": "\n"}


def unquote(text: str) -> str:
    """What NGINX holds for ``"text"`` in its configuration (ngx_conf_read_token):
    ``\\"``, ``\\'`` and ``\\\\`` lose the backslash; ``\\t``, ``\\r``, ``\\n`` are
    tab, CR and LF; any other backslash stays."""
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text) and text[i + 1] in _ESCAPES:
            out.append(_ESCAPES[text[i + 1]])
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)
