"""--default-server-tls-secret and --wildcard-tls-secret (NIC's flags): the
default server's certificate for names no host serves (or no SNI), and the
certificate of Ingress tls entries that name no Secret; both pushed as records,
so replacing a Secret reloads nothing."""

from __future__ import annotations

import pytest

from testkit.harness import (
    Backends,
    Ferryman,
    eventually,
    ingress,
    path,
    rule,
    service_with_backends,
    tls_secret,
)
from testkit.tls import served_names as _names

pytestmark = pytest.mark.flavours("nginx")


def _start(ferryman: Ferryman, backends: Backends, *flags: str) -> None:
    ferryman.extra_args += list(flags)
    ferryman.write("svc", service_with_backends("web", [backends.start("web")]))
    ferryman.write("secret-a", tls_secret("a-tls", ["a.example.com"]))
    ferryman.write(
        "ing",
        ingress(
            "tls",
            [rule("a.example.com", path("/", "web")), rule("w.example.com", path("/", "web"))],
            tls=[
                {"hosts": ["a.example.com"], "secretName": "a-tls"},
                {"hosts": ["w.example.com"]},
            ],
        ),
    )
    ferryman.start()


def test_default_server_certificate_for_unknown_names_and_no_sni(
    ferryman: Ferryman, backends: Backends
) -> None:
    ferryman.write("secret-d", tls_secret("default-tls", ["default.example.com"]))
    _start(ferryman, backends, "--default-server-tls-secret=default/default-tls")
    assert _names(ferryman.https_port, "a.example.com") == ["a.example.com"]
    assert _names(ferryman.https_port, "nobody.example.com") == ["default.example.com"]
    assert _names(ferryman.https_port, None) == ["default.example.com"]
    assert ferryman.get("nobody.example.com", "/", https=True).status == 404
    reloads = ferryman.reloads()
    # Replaced content: served at once, no reload.
    ferryman.write("secret-d", tls_secret("default-tls", ["other.example.com"]))
    eventually(lambda: _names(ferryman.https_port, None) == ["other.example.com"])
    assert ferryman.reloads() == reloads
    # Gone: handshakes naming no host are refused again, the hosts still served.
    ferryman.remove("secret-d")
    eventually(lambda: _names(ferryman.https_port, "nobody.example.com") is None)
    assert _names(ferryman.https_port, "a.example.com") == ["a.example.com"]
    assert ferryman.reloads() == reloads


def test_a_missing_default_secret_keeps_serving(ferryman: Ferryman, backends: Backends) -> None:
    _start(ferryman, backends, "--default-server-tls-secret=default/nowhere")
    assert _names(ferryman.https_port, "a.example.com") == ["a.example.com"]
    assert _names(ferryman.https_port, "nobody.example.com") is None
    eventually(lambda: "--default-server-tls-secret" in ferryman.logs())


def test_wildcard_certificate_for_tls_entries_naming_no_secret(
    ferryman: Ferryman, backends: Backends
) -> None:
    ferryman.write("secret-w", tls_secret("wild-tls", ["*.example.com"]))
    _start(ferryman, backends, "--wildcard-tls-secret=default/wild-tls")
    assert _names(ferryman.https_port, "w.example.com") == ["*.example.com"]
    assert _names(ferryman.https_port, "a.example.com") == ["a.example.com"]
    r = ferryman.get("w.example.com", "/", https=True)
    assert r.status == 200 and r.served_by == "web"


def test_without_the_flags_unknown_names_and_secretless_entries_are_refused(
    ferryman: Ferryman, backends: Backends
) -> None:
    _start(ferryman, backends)
    assert _names(ferryman.https_port, "a.example.com") == ["a.example.com"]
    assert _names(ferryman.https_port, "nobody.example.com") is None
    assert _names(ferryman.https_port, None) is None
    assert _names(ferryman.https_port, "w.example.com") is None
