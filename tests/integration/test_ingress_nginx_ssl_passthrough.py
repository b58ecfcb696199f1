"""ingress-nginx's ``ssl-passthrough: "true"`` through real NGINX and real TLS
backends: with ``--enable-ssl-passthrough`` (an alias of ``--enable-tls-passthrough``)
a client connecting with the Ingress's host as SNI name gets the backend's own
certificate, and whatever path it asks for, the backend of ``/`` answers; the
annotation removed, TLS ends in NGINX again; neither, nor an endpoint change,
reloads. A host a TransportServer passes through too is the oldest's
(kinds/ingress/records/passthrough.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from testkit.harness import (
    Ferryman,
    eventually,
    ingress,
    path,
    rule,
    service_with_backends,
    tls_secret,
)
from testkit.tls_backends import TlsBackend, https, start_tls_backend
from testkit.transport_docs import transport_server

P = "nginx.ingress.kubernetes.io/"
HOST = "pass.test"


@pytest.fixture
def tls_backends() -> Iterator[tuple[TlsBackend, TlsBackend]]:
    root = start_tls_backend("root", [HOST])
    other = start_tls_backend("other", [HOST])
    yield root, other
    root.close()
    other.close()


def _passed(annotations: dict[str, str], created: str | None = None) -> dict[str, Any]:
    """Ingress ``pass``: / to Service root, /other to Service other, TLS with its own Secret."""
    return ingress(
        "pass",
        [rule(HOST, path("/", "root"), path("/other", "other"))],
        tls=[{"hosts": [HOST], "secretName": "pass-tls"}],
        annotations=annotations,
        created=created,
    )


def _start(f: Ferryman, root: TlsBackend, other: TlsBackend, ing: dict[str, Any]) -> None:
    f.write("root", service_with_backends("root", [root]))
    f.write("other", service_with_backends("other", [other]))
    f.write("secret", tls_secret("pass-tls", [HOST]))
    f.write("ing", ing)
    f.start()


@pytest.mark.flavours("nginx", "nginx-1.30", "angie")
def test_the_hosts_tls_reaches_the_backend_of_slash_undecrypted(
    ferryman: Ferryman, tls_backends: tuple[TlsBackend, TlsBackend]
) -> None:
    f = ferryman
    root, other = tls_backends
    f.extra_args += ["--enable-ssl-passthrough"]
    passed = {P + "ssl-passthrough": "true"}
    _start(f, root, other, _passed(passed))
    reloads = f.reloads()
    certificate, response = https(f.https_port, HOST)
    assert certificate == root.certificate  # the backend's own, not the Ingress's Secret's
    assert response.endswith("hello from pod root\n"), response
    # The HTTP port serves the Ingress as without the annotation: its TLS redirects
    # to HTTPS (NIC's ssl-redirect), where the connection passes through.
    r = f.get(HOST, "/x")
    assert (r.status, r.headers["location"]) == (301, f"https://{HOST}:{f.https_port}/x")
    # Paths are not routed: TLS is never ended, so /other reaches / 's backend too.
    assert https(f.https_port, HOST, path="/other")[1].endswith("hello from pod root\n")
    assert f.events_for("pass")[-1]["reason"] == "AddedOrUpdated"
    # An endpoint change reaches the passthrough connections with no reload.
    f.write("root", service_with_backends("root", [other]))
    eventually(lambda: https(f.https_port, HOST)[0] == other.certificate, 60, "the new endpoint")
    f.write("root", service_with_backends("root", [root]))
    eventually(lambda: https(f.https_port, HOST)[0] == root.certificate, 60, "the old endpoint")
    # The annotation removed: TLS ends in NGINX, with the Ingress's Secret, and the
    # paths route again (plain HTTP to the TLS backends: not theirs to answer).
    f.write("ing", _passed({}))
    eventually(
        lambda: https(f.https_port, HOST)[0] not in (root.certificate, other.certificate),
        60,
        "TLS ended in NGINX",
    )
    f.write("ing", _passed(passed))
    eventually(lambda: https(f.https_port, HOST)[0] == root.certificate, 60, "passed again")
    assert f.reloads() == reloads


def test_without_the_flag_tls_ends_here_and_a_warning_names_the_flag(
    ferryman: Ferryman, tls_backends: tuple[TlsBackend, TlsBackend]
) -> None:
    """ingress-nginx ignores the annotation without its --enable-ssl-passthrough."""
    f = ferryman
    root, other = tls_backends
    _start(f, root, other, _passed({P + "ssl-passthrough": "true"}))
    event = f.events_for("pass")[-1]
    assert event["reason"] == "AddedOrUpdatedWithWarning"
    assert f"annotation {P}ssl-passthrough: needs --enable-ssl-passthrough" in event["message"]
    assert https(f.https_port, HOST)[0] not in (b"", root.certificate)


def test_a_host_an_ingress_and_a_transport_server_pass_through_is_the_oldests(
    ferryman: Ferryman, tls_backends: tuple[TlsBackend, TlsBackend]
) -> None:
    """The older Ingress holds the host: the TransportServer is Rejected with NIC's
    message and the Ingress's backend answers. The Ingress deleted, the
    TransportServer's backend answers; the Ingress back, younger now, it is told
    the host is taken."""
    f = ferryman
    root, other = tls_backends
    f.extra_args += ["--enable-tls-passthrough"]
    created = {"creationTimestamp": "2021-01-01T00:00:00Z"}
    ts = transport_server(
        "ts", "tls-passthrough", "TLS_PASSTHROUGH", "other", 80, host=HOST, metadata=created
    )
    f.write("ts", ts)
    _start(f, root, other, _passed({P + "ssl-passthrough": "true"}, created="2020-01-01T00:00:00Z"))
    reloads = f.reloads()
    assert https(f.https_port, HOST)[0] == root.certificate
    event = f.events_for("ts")[-1]
    assert (event["reason"], event["message"]) == ("Rejected", "Host is taken by another resource")
    f.remove("ing")
    eventually(lambda: https(f.https_port, HOST)[0] == other.certificate, 60, "the TransportServer")
    f.last_event("ts", "AddedOrUpdated")
    f.write("ing", _passed({P + "ssl-passthrough": "true"}))  # no timestamp: younger
    eventually(lambda: f.events_for("pass")[-1]["reason"] == "Rejected", 60, "the Ingress told")
    assert "host pass.test is taken by default/ts" in f.events_for("pass")[-1]["message"]
    assert https(f.https_port, HOST)[0] == other.certificate
    assert f.reloads() == reloads
