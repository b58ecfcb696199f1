"""bench/tls.py's pure helpers: the hand-written configuration and h2load's report."""

from pathlib import Path

import pytest
from bench.tls import handwritten_http, host, parse_h2load


def test_handwritten_http_has_one_tls_server_per_certificate() -> None:
    text = handwritten_http(8443, (9001, 9002), [Path("/c/0.pem"), Path("/c/1.pem")])
    assert text.count("server {") == 2
    assert "listen 127.0.0.1:8443 ssl http2 default_server reuseport;" in text
    assert text.count("default_server") == 1
    assert f"server_name {host(1)};" in text
    assert "ssl_certificate /c/1.pem;" in text
    assert "server 127.0.0.1:9002;" in text


def test_parse_h2load() -> None:
    out = (
        "finished in 1.02s, 19607.84 req/s, 2.10MB/s\n"
        "requests: 20000 total, 20000 started, 20000 done, 19990 succeeded, 10 failed, 0 errored\n"
    )
    assert parse_h2load(out) == (19607.84, 19990, 10)
    with pytest.raises(ValueError):
        parse_h2load("nothing")
