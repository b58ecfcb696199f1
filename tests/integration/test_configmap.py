"""--nginx-configmaps in manifests mode, with real NGINX: each key's effect seen by a
client, a backend or a log; bad values and values NGINX refuses; reloads counted."""

from __future__ import annotations

import socket
import ssl
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from testkit.configmap_docs import NAME, NS, _events, _updated, configmap
from testkit.harness import (
    FERRYMAN,
    Backends,
    Ferryman,
    eventually,
    ingress,
    path,
    rule,
    service_with_backends,
    tls_secret,
)


def _old_workers_closed(f: Ferryman) -> None:
    """Waits until the workers of the configuration before the last reload stopped
    accepting: NGINX (and Angie) retitle a worker "is shutting down" as it closes
    its listeners, so once the master's only workers not shutting down are
    ``--worker-processes`` (2) titled ones and no child is still a fresh fork
    (titled as the master), every old worker has closed them. Call it once the
    new configuration answered (its workers exist). A fixed sleep raced with the
    old workers on a loaded machine."""

    def closed() -> bool:
        master = f.nginx_master_pid()
        if master is None:
            return False
        titles = []
        for pid in Path(f"/proc/{master}/task/{master}/children").read_text().split():
            try:
                titles.append(Path(f"/proc/{pid}/cmdline").read_bytes())
            except OSError:
                continue  # exited
        current = [t for t in titles if b"worker process" in t and b"shutting down" not in t]
        return len(current) == 2 and not any(b"master process" in t for t in titles)

    eventually(closed, 60, "the old workers closing their listeners")


def _soon(f: Ferryman, check: Callable[[], bool], what: str = "the new configuration") -> None:
    """Waits until ``check`` holds, then until the old workers stopped accepting.

    A reload is confirmed once a new worker answers; for a few tens of
    milliseconds after that (longer on a loaded machine), the old workers (told to
    quit) may still accept a connection and answer it with the old configuration
    (measured: old answers up to 0.07 s after the first new one), so the first
    request may not see the change, and one request seeing it does not mean the
    next will."""
    eventually(check, 60, what)
    _old_workers_closed(f)


def _start(f: Ferryman, backends: Backends, tls: bool = False, **data: str) -> None:
    f.extra_args += ["--nginx-configmaps", f"{NS}/{NAME}"]
    f.write("svc", service_with_backends("app", [backends.start("app")]))
    spec_tls = [{"hosts": ["cm.test"], "secretName": "cert"}] if tls else None
    if tls:
        f.write("cert", tls_secret("cert", ["cm.test"]))
    f.write("ing", ingress("app", [rule("cm.test", path("/", "app"))], tls=spec_tls))
    f.write("cm", configmap(**data))
    f.start()


@pytest.mark.flavours("nginx", "nginx-1.30", "angie")
def test_proxy_read_timeout_fires_after_an_edit_and_reloads_once(
    ferryman: Ferryman, backends: Backends
) -> None:
    _start(ferryman, backends)
    _updated(ferryman, 1)
    assert ferryman.get("cm.test", "/?delay=1.5").status == 200
    reloads = ferryman.reloads()
    ferryman.write("cm", configmap(proxy_read_timeout="1"))
    assert _updated(ferryman, 2)[-1] == (
        "Normal",
        "Updated",
        f"ConfigMap {NS}/{NAME} updated without error",
    )
    _soon(ferryman, lambda: ferryman.get("cm.test", "/?delay=1.5").status == 504, "504")
    ferryman.reloads_reach(reloads + 1)
    # The same value written another way, and a key NIC does not know: no reload.
    ferryman.write("cm", configmap(proxy_read_timeout="1s", unknown_key="x"))
    _updated(ferryman, 3)
    time.sleep(0.5)
    assert ferryman.reloads() == reloads + 1
    # A bad value: a Warning naming the key, the last good value kept, others apply.
    ferryman.write("cm", configmap(proxy_read_timeout="soon", client_max_body_size="10"))
    assert _updated(ferryman, 4)[-1][1] == "UpdatedWithError"
    assert (
        "Warning",
        "InvalidValue",
        f"ConfigMap {NS}/{NAME} 'proxy-read-timeout' invalid time string \"soon\", ignoring",
    ) in _events(ferryman)
    _soon(
        ferryman,
        lambda: ferryman.get("cm.test", "/", method="POST", content=b"x" * 99).status == 413,
    )
    assert ferryman.get("cm.test", "/?delay=1.5").status == 504
    ferryman.reloads_reach(reloads + 2)
    # The ConfigMap deleted: every default back (60s, 1m).
    ferryman.remove("cm")
    _updated(ferryman, 5)
    _soon(
        ferryman,
        lambda: ferryman.get("cm.test", "/", method="POST", content=b"x" * 99).status == 200,
    )
    assert ferryman.get("cm.test", "/?delay=1.5").status == 200


def test_a_value_nginx_refuses_keeps_the_previous_configuration(
    ferryman: Ferryman, backends: Backends
) -> None:
    _start(ferryman, backends, server_tokens="true")
    _updated(ferryman, 1)
    errors = "nginx_ingress_controller_nginx_reload_errors_total"
    before = ferryman.metrics()[errors]
    ferryman.write("cm", configmap(server_tokens="false", ssl_ciphers="NO-SUCH-CIPHER"))
    event = _updated(ferryman, 2)[-1]
    assert event[:2] == ("Warning", "UpdatedWithError")
    assert event[2].startswith(f"ConfigMap {NS}/{NAME} was updated, but not applied: ")
    assert "NO-SUCH-CIPHER" in event[2]
    assert ferryman.metrics()[errors] == before + 1
    # Still serving, with the previous values (server-tokens on).
    r = ferryman.get("cm.test")
    assert r.status == 200 and r.headers["server"].startswith("nginx/")
    ferryman.write("cm", configmap(server_tokens="false"))
    _updated(ferryman, 3)
    _soon(ferryman, lambda: ferryman.get("cm.test").headers["server"] == "nginx")


def test_a_refused_value_at_start_up_still_opens_the_listeners(
    ferryman: Ferryman, backends: Backends
) -> None:
    _start(ferryman, backends, ssl_ciphers="NO-SUCH-CIPHER", server_tokens="true")
    assert ferryman.get("cm.test").status == 200
    assert any("but not applied" in e[2] for e in _events(ferryman))


@pytest.mark.flavours("nginx", "nginx-1.30", "angie")
def test_server_tokens_hides_or_shows_the_version(ferryman: Ferryman, backends: Backends) -> None:
    name = "Angie" if ferryman.flavour == "angie" else "nginx"  # the server's
    _start(ferryman, backends)
    assert ferryman.get("cm.test").headers["server"] == name  # ferryman's default
    ferryman.write("cm", configmap(server_tokens="True"))
    eventually(lambda: ferryman.get("cm.test").headers["server"].startswith(f"{name}/1."), 60)


def _syslog() -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.settimeout(10)
    return s


@pytest.mark.flavours("nginx", "nginx-1.30", "angie")
def test_log_format_and_access_log_reach_syslog(ferryman: Ferryman, backends: Backends) -> None:
    log = _syslog()
    port = log.getsockname()[1]
    _start(
        ferryman,
        backends,
        access_log=f"syslog:server=127.0.0.1:{port},tag=cmtest main",
        log_format="ferryman-line uri=$request_uri status=$status\nquote=' brace={ semi=;",
        log_format_escaping="json",
    )
    ferryman.get("cm.test", "/logged")
    line = log.recv(65536).decode()
    assert "cmtest:" in line
    assert line.endswith("ferryman-line uri=/logged status=200 quote=' brace={ semi=;")
    # access-log-off: no line for the next request.
    ferryman.write(
        "cm", configmap(access_log_off="true", access_log=f"syslog:server=127.0.0.1:{port}")
    )
    _updated(ferryman, 2)
    _old_workers_closed(ferryman)  # the old workers (which log) stopped accepting
    ferryman.get("cm.test", "/not-logged")
    log.settimeout(1)
    with pytest.raises(TimeoutError):
        log.recv(65536)


def test_real_ip_from_a_trusted_proxy_is_the_client_address(
    ferryman: Ferryman, backends: Backends
) -> None:
    _start(ferryman, backends)
    forwarded = {"X-Forwarded-For": "203.0.113.7"}
    assert ferryman.get("cm.test", headers=forwarded).json()["headers"]["x-real-ip"] == "127.0.0.1"
    ferryman.write(
        "cm", configmap(set_real_ip_from="127.0.0.1,10.0.0.0/8", real_ip_header="X-Forwarded-For")
    )
    _updated(ferryman, 2)
    _soon(
        ferryman,
        lambda: (
            ferryman.get("cm.test", headers=forwarded).json()["headers"]["x-real-ip"]
            == "203.0.113.7"
        ),
    )


def _handshake(port: int, version: ssl.TLSVersion, alpn: list[str] | None = None) -> str | None:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.minimum_version = ctx.maximum_version = version
    if alpn:
        ctx.set_alpn_protocols(alpn)
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        ctx.wrap_socket(raw, server_hostname="cm.test") as tls,
    ):
        return tls.selected_alpn_protocol()


def test_tls_keys_protocols_http2_and_hsts(ferryman: Ferryman, backends: Backends) -> None:
    _start(ferryman, backends, tls=True)
    port = ferryman.https_port
    assert _handshake(port, ssl.TLSVersion.TLSv1_2, ["h2", "http/1.1"]) == "http/1.1"
    assert "strict-transport-security" not in ferryman.get("cm.test", https=True).headers
    ferryman.write(
        "cm",
        configmap(
            ssl_protocols="TLSv1.3",
            http2="true",
            hsts="true",
            hsts_max_age="100",
            hsts_include_subdomains="true",
        ),
    )
    _updated(ferryman, 2)
    _soon(ferryman, lambda: _handshake(port, ssl.TLSVersion.TLSv1_3, ["h2", "http/1.1"]) == "h2")
    with pytest.raises(ssl.SSLError):
        _handshake(port, ssl.TLSVersion.TLSv1_2)
    r = ferryman.get("cm.test", https=True)
    assert r.headers["strict-transport-security"] == "max-age=100; includeSubDomains; preload"
    # Only over HTTPS (NIC's rule; plain HTTP to a TLS host is redirected anyway).
    assert "strict-transport-security" not in ferryman.get("cm.test").headers


def test_redirect_to_https_behind_a_load_balancer(ferryman: Ferryman, backends: Backends) -> None:
    _start(ferryman, backends, redirect_to_https="true", http_redirect_code="308")
    r = ferryman.get("cm.test", "/a?b=c", headers={"X-Forwarded-Proto": "http"})
    assert (r.status, r.headers["location"]) == (308, "https://cm.test/a?b=c")
    assert ferryman.get("cm.test", headers={"X-Forwarded-Proto": "https"}).status == 200


def _workers(master: int) -> int:
    out = subprocess.run(
        ["ps", "-o", "args=", "--ppid", str(master)], capture_output=True, text=True, check=False
    )
    return sum(1 for line in out.stdout.splitlines() if "worker process" in line)


def test_worker_processes_sets_the_number_of_workers(
    ferryman: Ferryman, backends: Backends
) -> None:
    _start(ferryman, backends, worker_processes="3")
    master = ferryman.nginx_master_pid()
    assert master is not None
    eventually(lambda: _workers(master) == 3, 60, "3 workers")
    ferryman.write("cm", configmap(worker_processes="1"))
    eventually(lambda: _workers(master) == 1, 60, "1 worker")


def test_ferryman_render_applies_the_configmap(tmp_path: Any) -> None:
    manifests = tmp_path / "m"
    manifests.mkdir()
    (manifests / "cm.yaml").write_text(yaml.safe_dump(configmap(worker_connections="2048")))
    out = subprocess.run(
        [
            str(FERRYMAN),
            "render", "--manifests", str(manifests), "--output", str(tmp_path / "o"),
            "--nginx-configmaps", f"{NS}/{NAME}",
        ],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "worker_connections 2048;" in (tmp_path / "o" / "nginx.conf").read_text()


def test_body_size_and_timeouts_on_either_fast_path(
    either_fast_path: Ferryman, backends: Backends
) -> None:
    """The module and the Lua fast path both take the http-level defaults."""
    f = either_fast_path
    _start(f, backends, client_max_body_size="50", proxy_read_timeout="1s")
    assert f.get("cm.test", "/", method="POST", content=b"x" * 51).status == 413
    assert f.get("cm.test", "/", method="POST", content=b"x" * 50).status == 200
    assert f.get("cm.test", "/?delay=1.5").status == 504


def test_proxy_protocol_and_its_address_as_the_client(
    ferryman: Ferryman, backends: Backends
) -> None:
    _start(
        ferryman,
        backends,
        proxy_protocol="true",
        set_real_ip_from="127.0.0.1",
        real_ip_header="proxy_protocol",
    )

    def through_proxy() -> str:
        with socket.create_connection(("127.0.0.1", ferryman.http_port), timeout=5) as s:
            s.sendall(
                b"PROXY TCP4 198.51.100.9 127.0.0.1 40000 80\r\n"
                b"GET / HTTP/1.1\r\nHost: cm.test\r\nConnection: close\r\n\r\n"
            )
            data = b""
            while chunk := s.recv(65536):
                data += chunk
        return data.decode(errors="replace")

    answer = through_proxy()
    assert answer.startswith("HTTP/1.1 200")
    assert '"x-real-ip": "198.51.100.9"' in answer
    # A client without the PROXY header is refused (NGINX's "broken header").
    with pytest.raises(Exception):  # noqa: B017 - httpx's error type varies with how it ends
        ferryman.get("cm.test")


def _rsa_secret(name: str, host: str) -> dict[str, Any]:
    """A TLS Secret with an RSA key: DHE-RSA needs one (ferryman's own are ECDSA)."""
    import base64
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
        .sign(key, hashes.SHA256())
    )
    pem_key = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    pem_cert = cert.public_bytes(serialization.Encoding.PEM)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {"name": name, "namespace": "default"},
        "data": {
            "tls.crt": base64.b64encode(pem_cert).decode(),
            "tls.key": base64.b64encode(pem_key).decode(),
        },
    }


def _dhe_cipher(port: int) -> str:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers("DHE-RSA-AES128-GCM-SHA256")
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        ctx.wrap_socket(raw, server_hostname="cm.test") as tls,
    ):
        cipher = tls.cipher()
        return cipher[0] if cipher else ""


def test_ssl_dhparam_file_enables_dhe(ferryman: Ferryman, backends: Backends) -> None:
    params = subprocess.run(
        ["openssl", "genpkey", "-genparam", "-algorithm", "DH", "-pkeyopt", "dh_param:ffdhe2048"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    ferryman.extra_args += ["--nginx-configmaps", f"{NS}/{NAME}"]
    ferryman.write("svc", service_with_backends("app", [backends.start("app")]))
    ferryman.write("cert", _rsa_secret("cert", "cm.test"))
    tls = [{"hosts": ["cm.test"], "secretName": "cert"}]
    ferryman.write("ing", ingress("app", [rule("cm.test", path("/", "app"))], tls=tls))
    ferryman.write("cm", configmap())
    ferryman.start()
    with pytest.raises(ssl.SSLError):  # NGINX offers no DHE without parameters
        _dhe_cipher(ferryman.https_port)
    ferryman.write("cm", configmap(ssl_dhparam_file=params))
    _updated(ferryman, 2)
    _soon(ferryman, lambda: _dhe_cipher(ferryman.https_port) == "DHE-RSA-AES128-GCM-SHA256", "DHE")
    assert (ferryman.state / "dhparam.pem").read_text() == params.strip() + "\n"


def test_hidden_and_passed_backend_headers(ferryman: Ferryman, backends: Backends) -> None:
    _start(ferryman, backends)
    r = ferryman.get("cm.test")
    assert r.headers["server"] == "nginx" and "content-type" in r.headers
    ferryman.write("cm", configmap(proxy_hide_headers="Content-Type", proxy_pass_headers="Server"))
    _updated(ferryman, 2)
    _soon(ferryman, lambda: ferryman.get("cm.test").headers["server"].startswith("BaseHTTP/"))
    r = ferryman.get("cm.test")
    assert r.headers["server"].startswith("BaseHTTP/") and "content-type" not in r.headers


def _keepalive(port: int, requests: int, idle: float) -> list[bool]:
    """Per request on one connection: whether it was answered; then whether the
    connection is still open after ``idle`` seconds."""
    answered = []
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        for _ in range(requests):
            try:
                s.sendall(b"GET / HTTP/1.1\r\nHost: cm.test\r\n\r\n")
                head = s.recv(65536)
                answered.append(head.startswith(b"HTTP/1.1 200"))
            except OSError:
                answered.append(False)
        time.sleep(idle)
        s.settimeout(0.5)
        try:
            answered.append(s.recv(1) == b"" and False)  # b"": closed by NGINX
        except TimeoutError:
            answered.append(True)  # still open
    return answered


def test_keepalive_timeout_and_requests(ferryman: Ferryman, backends: Backends) -> None:
    _start(ferryman, backends)
    assert _keepalive(ferryman.http_port, 3, 1.5) == [True, True, True, True]
    ferryman.write("cm", configmap(keepalive_timeout="1s", keepalive_requests="2"))
    _updated(ferryman, 2)
    _old_workers_closed(ferryman)
    answered = _keepalive(ferryman.http_port, 3, 0)
    assert answered[:3] == [True, True, False]  # closed after the second
    assert _keepalive(ferryman.http_port, 1, 1.5) == [True, False]  # idle longer than 1s


def _nofile(pid: int) -> str:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            return line.split()[3]
    return ""


def test_worker_rlimit_nofile(ferryman: Ferryman, backends: Backends) -> None:
    _start(ferryman, backends, worker_rlimit_nofile="4321")
    master = ferryman.nginx_master_pid()
    assert master is not None

    def limits() -> set[str]:
        out = subprocess.run(
            ["ps", "-o", "pid=,args=", "--ppid", str(master)], capture_output=True, text=True
        )
        workers = [int(ln.split()[0]) for ln in out.stdout.splitlines() if "worker" in ln]
        return {_nofile(pid) for pid in workers}

    # The bootstrap configuration's workers (NGINX's own limit) leave after the reload.
    eventually(lambda: limits() == {"4321"}, 60, "the workers' open files limit")


def test_access_logs_on_without_syslog_reach_ferrymans_log(
    ferryman: Ferryman, backends: Backends
) -> None:
    """access-log-off: false with no access-log: NIC's main format on NGINX's
    stderr, which ferryman forwards to its own log (NIC writes /dev/stdout)."""
    _start(ferryman, backends, access_log_off="false")
    ferryman.get("cm.test", "/seen-in-the-log")
    line = eventually(
        lambda: [ln for ln in ferryman.logs().splitlines() if "/seen-in-the-log" in ln], 60
    )[0]
    assert "logger=ferryman.nginx" in line
    assert '\\"GET /seen-in-the-log HTTP/1.1\\" 200' in line


def test_default_server_return_answers_hosts_nobody_routes(
    ferryman: Ferryman, backends: Backends
) -> None:
    """NIC's default-server-return: a fixed answer or a redirect for hosts no
    Ingress routes (404 without it); routed hosts unaffected; "$" stays text; a
    value NGINX's return would not take is refused with a Warning, the last good
    one kept."""
    f = ferryman
    _start(f, backends, default_server_return="302 https://nginx.org/")
    r = f.get("nobody.test", "/x")
    assert (r.status, r.headers["location"]) == (302, "https://nginx.org/")
    assert f.get("cm.test").served_by == "app"
    f.write("cm", configmap(default_server_return="410 gone $host; return 200 x"))
    _soon(f, lambda: f.get("nobody.test").status == 410)
    assert f.get("nobody.test").text == "gone $host; return 200 x"
    f.write("cm", configmap(default_server_return="999 nope"))
    event = _updated(f, 3)[2]
    assert event[:2] == ("Warning", "UpdatedWithError")
    assert "Invalid value for 'default-server-return'" in f.logs()
    assert f.get("nobody.test").status == 410
    f.write("cm", configmap())
    _soon(f, lambda: f.get("nobody.test").status == 404)


@pytest.mark.flavours("nginx", "nginx-1.30", "angie")
def test_add_header_on_every_route_but_those_adding_their_own(
    ferryman: Ferryman, backends: Backends
) -> None:
    """add-header as NIC's http-level add_header: every answer of the host's
    routes carries it (2xx/3xx, or always), except a route with add-header of
    its own, which sends only its own (NGINX's inheritance)."""
    f = ferryman
    _start(f, backends)
    assert "x-frame-options" not in f.get("cm.test").headers
    own = ingress(
        "own", [rule("own.test", path("/", "app"))],
        annotations={"nginx.org/add-header": "X-Own: yes"},
    )  # fmt: skip
    f.write("own", own)
    f.write(
        "cm",
        configmap(add_header='X-Frame-Options: DENY, X-Quote: say \\"hi\\"; ok, X-Err: e: always'),
    )
    _updated(f, 2)
    _soon(f, lambda: f.get("cm.test").headers.get("x-frame-options") == "DENY")
    r = f.get("cm.test")  # the C module's fast path
    assert r.status == 200 and r.headers["x-quote"] == 'say "hi"; ok' and r.headers["x-err"] == "e"
    missing = f.get("nobody.test")  # a host nobody routes: 404, "always" only
    assert missing.status == 404
    assert "x-frame-options" not in missing.headers and missing.headers["x-err"] == "e"
    r = f.get("own.test")  # the slow path, with its own header
    assert r.status == 200 and r.headers["x-own"] == "yes"
    assert "x-frame-options" not in r.headers and "x-err" not in r.headers
    # A value NGINX would read as a variable is refused; the headers stay.
    f.write("cm", configmap(add_header="X-Bad: $host"))
    _updated(f, 3)
    assert f.get("cm.test").headers.get("x-frame-options") == "DENY"
    assert any("add-header" in m for _, _, m in _events(f))
