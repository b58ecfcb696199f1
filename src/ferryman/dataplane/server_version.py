"""Which server the data plane runs, as far as the configuration differs.

One thing does: HTTP/2 without TLS beside HTTP/1.1 on one socket (h2c with
prior knowledge, which gRPC clients speak to a Gateway's HTTP listeners).
NGINX 1.25.1 added the ``http2`` directive, and with it on a plaintext
socket compares a connection's first bytes with HTTP/2's preface
(``ngx_http_wait_request_handler``, src/http/ngx_http_request.c of 1.30.4):
the preface makes it HTTP/2, anything else HTTP/1.x. Before 1.25.1 the only
switch is ``listen ... http2``, and a plaintext socket with it speaks HTTP/2
alone: Debian's 1.22 answers an HTTP/1.1 request with an HTTP/2 GOAWAY frame
(measured here). Angie has the directive since its 1.2 (NGINX 1.25.1's code).
"""

from __future__ import annotations

import functools
import re
import subprocess

# "nginx version: nginx/1.22.1", "nginx version: Angie/1.12.1".
_VERSION = re.compile(r"version: (nginx|Angie)/(\d+)\.(\d+)\.(\d+)", re.IGNORECASE)
_H2C_SINCE = {"nginx": (1, 25, 1), "angie": (1, 2, 0)}


def h2c_from(version_text: str) -> bool:
    """Whether the server ``-v`` printed this serves h2c beside HTTP/1.1."""
    m = _VERSION.search(version_text)
    if m is None:
        return False
    name = m.group(1).lower()
    version = (int(m.group(2)), int(m.group(3)), int(m.group(4)))
    return version >= _H2C_SINCE[name]


@functools.cache
def serves_h2c(binary: str) -> bool:
    """``h2c_from`` of ``binary -v`` (it prints to stderr); False when the
    binary cannot be run: the configuration then asks for nothing it may lack."""
    try:
        out = subprocess.run(
            [binary, "-v"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return h2c_from(out.stderr + out.stdout)
