"""TLS and HTTP/2 through ferryman against hand-written NGINX, with 1,000
certificates loaded (issue 31 item 2).

    .venv/bin/python -m bench.tls [--hosts 1000] [--seconds 3] [--rounds 3]

``--hosts`` Ingresses ``app<i>.bench.test``, each with its own TLS Secret (an
EC P-256 leaf signed by one bench CA); the hand-written side is the same NGINX
binary with the same worker count and one ``server`` block per host naming
its certificate with static ``ssl_certificate`` lines, proxying to the same
backend. Rows, each side in turn per round (the order rotating), the ratio
the median of the rounds' ferryman/hand-written ratios:

- ``full_tls12`` / ``full_tls13``: new handshakes per second, one request per
  connection (Python clients in ``CLIENTS`` processes, SNI names cycling over
  all hosts: neither s_time nor wrk sets an SNI name apart from the URL);
- ``resumed_tls12`` / ``resumed_tls13``: the same, each connection resuming
  the previous one's session (session tickets);
- ``https_keepalive``: HTTP/1.1 requests per second over kept-alive TLS
  connections (``h2load --h1``, 64 connections);
- ``h2_streams``: HTTP/2 streams per second (``h2load -c 16 -m 32``).

Both sides set ``keepalive_requests`` to ``KEEPALIVE_REQUESTS``: NGINX's default
of 1,000 closes an HTTP/2 connection after 1,000 streams and h2load does not
reconnect, so a run of more than 16,000 streams counted the rest as failed
(the first run's "4,000 of 20,000 failed" on ferryman was that, not ferryman).

Beside the wall-clock rates (which the clients' own CPU and whatever else runs
on the machine move), NGINX's CPU per handshake or request (master and
workers, from /proc) is the figure to compare on a shared machine.
"""

from __future__ import annotations

import argparse
import datetime
import multiprocessing
import re
import socket
import ssl
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.processes import (
    alternating,
    bench_bed,
    cpu_seconds,
    free_port,
    publish,
    when_and_where,
    write_yaml,
)
from bench.run import PROXY_HEADERS

KEEPALIVE_REQUESTS = 1_000_000
CLIENTS = 4  # handshake client processes: enough to keep 2 NGINX workers busy
ROWS = (
    "full_tls12",
    "full_tls13",
    "resumed_tls12",
    "resumed_tls13",
    "https_keepalive",
    "h2_streams",
)


def host(i: int) -> str:
    return f"app{i}.bench.test"


def make_certificates(n: int) -> tuple[bytes, list[tuple[bytes, bytes]]]:
    """One CA and ``n`` leaves (PEM chain, PEM key), leaf ``i`` for ``host(i)``.
    EC P-256: a thousand RSA keys would take a minute to generate."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "ferryman bench CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    ca_pem = ca.public_bytes(serialization.Encoding.PEM)
    leaves = []
    for i in range(n):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host(i))]))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(host(i))]), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        chain = cert.public_bytes(serialization.Encoding.PEM) + ca_pem
        key_pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
        leaves.append((chain, key_pem))
    return ca_pem, leaves


def ingress_docs(i: int, chain: bytes, key: bytes, ports: tuple[int, int]) -> list[dict[str, Any]]:
    """Ingress i with TLS: its host, its Secret, its Service with 2 endpoints."""
    import base64

    name = f"app{i}"
    ingress = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "ingressClassName": "ferryman",
            "tls": [{"hosts": [host(i)], "secretName": f"tls-{name}"}],
            "rules": [
                {
                    "host": host(i),
                    "http": {
                        "paths": [
                            {
                                "path": "/",
                                "pathType": "Prefix",
                                "backend": {"service": {"name": name, "port": {"number": 80}}},
                            }
                        ]
                    },
                }
            ],
        },
    }
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {"name": f"tls-{name}", "namespace": "default"},
        "data": {
            "tls.crt": base64.b64encode(chain).decode(),
            "tls.key": base64.b64encode(key).decode(),
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"ports": [{"port": 80, "name": "http"}]},
    }
    slices = [
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": f"{name}-{k}",
                "namespace": "default",
                "labels": {"kubernetes.io/service-name": name},
            },
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": port}],
            "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}],
        }
        for k, port in enumerate(ports)
    ]
    return [ingress, secret, service, *slices]


def handwritten_http(port: int, backends: tuple[int, int], certs: list[Path]) -> str:
    """The hand-written http block: an upstream of the backends and one TLS
    server per host, ``certs[i]`` holding host i's chain and key."""
    servers = "\n".join(
        f"""    server {{
        listen 127.0.0.1:{port} ssl http2{" default_server reuseport" if i == 0 else ""};
        server_name {host(i)};
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_certificate {cert};
        ssl_certificate_key {cert};
        location / {{
            proxy_pass http://app;{PROXY_HEADERS}
        }}
    }}"""
        for i, cert in enumerate(certs)
    )
    return f"""    upstream app {{
        server 127.0.0.1:{backends[0]};
        server 127.0.0.1:{backends[1]};
        keepalive 64;
    }}
{servers}"""


def parse_h2load(out: str) -> tuple[float, int, int]:
    """(requests per second, requests succeeded, requests failed) of h2load's report."""
    rps = re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", out)
    done = re.search(
        r"requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded, (\d+) failed", out
    )
    if not rps or not done:
        raise ValueError(f"no h2load report in {out!r}")
    return float(rps.group(1)), int(done.group(1)), int(done.group(2))


def _handshakes(args: tuple[int, str, int, float, bool, int]) -> tuple[int, int]:
    """One client process: connections for ``seconds``, each one request with
    ``Connection: close``, SNI names cycling from ``first`` over ``hosts``;
    ``resume``: offering the previous connection's session. Returns
    (connections, of which resumed)."""
    port, version, hosts, seconds, resume, first = args
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    v = ssl.TLSVersion.TLSv1_2 if version == "1.2" else ssl.TLSVersion.TLSv1_3
    ctx.minimum_version = ctx.maximum_version = v
    done = resumed = 0
    sessions: dict[str, ssl.SSLSession] = {}
    i = first
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        # Resumed: a few names per client, each resuming its own last session
        # (a session belongs to the certificate's server name).
        name = host(i % hosts) if not resume else host((first + i % 4) % hosts)
        i += 1
        raw = socket.create_connection(("127.0.0.1", port))
        # As browsers do: without it the request after an abbreviated TLS 1.2
        # handshake waits for the delayed ACK of the client's Finished (~40 ms).
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with raw, ctx.wrap_socket(raw, server_hostname=name, session=sessions.get(name)) as s:
            s.sendall(f"GET / HTTP/1.1\r\nHost: {name}\r\nConnection: close\r\n\r\n".encode())
            while s.recv(65536):
                pass
            if s.session_reused:
                resumed += 1
            if resume and s.session is not None:
                sessions[name] = s.session
        done += 1
    return done, resumed


def handshake_rate(
    port: int, version: str, hosts: int, seconds: float, resume: bool
) -> tuple[float, int, float]:
    """(connections per second, connections, fraction resumed) over CLIENTS processes."""
    jobs = [(port, version, hosts, seconds, resume, k * (hosts // CLIENTS)) for k in range(CLIENTS)]
    started = time.monotonic()
    with multiprocessing.Pool(CLIENTS) as pool:
        results = pool.map(_handshakes, jobs)
    elapsed = time.monotonic() - started
    n = sum(r[0] for r in results)
    return n / max(elapsed, seconds), n, sum(r[1] for r in results) / max(n, 1)


def h2load(port: int, name: str, n: int, h1: bool) -> tuple[float, int]:
    cmd = ["h2load", f"--connect-to=127.0.0.1:{port}", f"-n{n}", "-t2"]
    cmd += ["--h1", "-c64"] if h1 else ["-c16", "-m32"]
    out = subprocess.run(
        [*cmd, f"https://{name}:{port}/"], capture_output=True, text=True, check=True
    ).stdout
    rps, ok, failed = parse_h2load(out)
    if failed:
        # Reported, not raised: the row shows 0 and the failures are printed.
        print(f"h2load: {failed} failed requests to {name} on port {port}:\n{out[-600:]}")
        return 0.0, ok
    return rps, ok


def measure(row: str, port: int, hosts: int, seconds: float, rate_hint: float) -> tuple[float, int]:
    """One row's run against ``port``: (rate, handshakes or requests)."""
    if row.startswith(("full", "resumed")):
        version = "1.2" if row.endswith("12") else "1.3"
        rate, n, reused = handshake_rate(port, version, hosts, seconds, row.startswith("resumed"))
        if row.startswith("resumed") and reused < 0.5:  # the first per name is full
            raise RuntimeError(f"{row}: only {reused:.0%} of connections resumed")
        return rate, n
    # h2load runs a count, not a time: size it from the previous run's rate.
    n = max(2000, int(rate_hint * seconds))
    name = host(hosts // 2)
    return h2load(port, name, n, h1=row == "https_keepalive")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rows", default=",".join(ROWS), help="comma-separated rows to run")
    args = ap.parse_args()
    args.rows = tuple(r for r in ROWS if r in args.rows.split(","))
    t0 = time.monotonic()
    _, leaves = make_certificates(args.hosts)
    print(f"{args.hosts} certificates in {time.monotonic() - t0:.1f} s")
    with bench_bed("fbench-tls-", ["--nginx-configmaps", "default/nginx-config"]) as (
        work,
        backends,
        f,
    ):
        ports = (backends.ports[0], backends.ports[1])
        docs: list[dict[str, Any]] = []
        certdir = work / "certs"
        certdir.mkdir()
        certs = []
        for i, (chain, key) in enumerate(leaves):
            docs += ingress_docs(i, chain, key, ports)
            path = certdir / f"{i}.pem"
            path.write_bytes(chain + key)
            certs.append(path)
        cm = {"apiVersion": "v1", "kind": "ConfigMap"}
        cm["metadata"] = {"name": "nginx-config", "namespace": "default"}  # type: ignore[assignment]
        write_yaml(
            f.manifests / "configmap.yaml",
            [{**cm, "data": {"http2": "true", "keepalive-requests": str(KEEPALIVE_REQUESTS)}}],
        )
        write_yaml(f.manifests / "apps.yaml", docs)
        ready = f.start()
        print(f"ferryman ready in {ready:.1f} s")
        hw_port = free_port()
        hw_proc = _start_handwritten(work, hw_port, ports, certs)
        try:
            sides = {
                "ferryman": (f.https_port, int((f.workdir / "state" / "nginx.pid").read_text())),
                "handwritten": (hw_port, hw_proc.pid),
            }
            result = _rounds(sides, args)
        finally:
            hw_proc.terminate()
            hw_proc.wait(10)
        result["reloads"] = f.reloads()
        result["ferryman_ready_seconds"] = ready
    result.update(when_and_where())
    result["hosts"] = args.hosts
    result["command"] = (
        f".venv/bin/python -m bench.tls --hosts {args.hosts} --seconds {args.seconds} "
        f"--rounds {args.rounds} --rows {','.join(args.rows)}"
    )
    lines = [
        f"{'row':<16} {'ferryman/s':>11} {'hand/s':>9} {'ratio':>6} "
        f"{'f us':>7} {'h us':>7} {'cpu ratio':>9}"
    ]
    for row in args.rows:
        r = result["rows"][row]
        lines.append(
            f"{row:<16} {r['ferryman_rate']:>11.0f} {r['handwritten_rate']:>9.0f} "
            f"{r['ratio']:>6.2f} {r['ferryman_cpu_us']:>7.1f} {r['handwritten_cpu_us']:>7.1f} "
            f"{r['cpu_ratio']:>9.2f}"
        )
    out = Path(__file__).parent / "results" / f"tls-{args.hosts}.json"
    publish(result, "\n".join(lines), out)


def _start_handwritten(work: Path, port: int, ports: tuple[int, int], certs: list[Path]) -> Any:
    """The hand-written NGINX, ready once host 0 answers over TLS."""
    d = work / "handwritten"
    (d / "tmp").mkdir(parents=True, exist_ok=True)
    (d / "nginx.conf").write_text(
        f"""
worker_processes 2;
pid {d}/nginx.pid;
error_log stderr error;
events {{ worker_connections 16384; }}
http {{
    access_log off;
    keepalive_requests {KEEPALIVE_REQUESTS};
    server_names_hash_bucket_size 128;
    proxy_temp_path {d}/tmp;
{handwritten_http(port, ports, certs)}
}}
"""
    )
    proc = subprocess.Popen(
        ["nginx", "-p", str(d), "-c", str(d / "nginx.conf"), "-e", "stderr", "-g", "daemon off;"],
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            if h2load(port, host(0), 64, h1=True)[0] > 0:  # 0: some requests failed
                return proc
        except (subprocess.CalledProcessError, RuntimeError, ValueError):
            if time.monotonic() > deadline:
                raise
        if time.monotonic() > deadline:
            raise RuntimeError(f"hand-written NGINX on port {port} not answering after 30 s")
        time.sleep(0.1)


def _rounds(sides: dict[str, tuple[int, int]], args: argparse.Namespace) -> dict[str, Any]:
    names = sorted(sides)
    rates: dict[str, dict[str, list[float]]] = {r: {n: [] for n in names} for r in args.rows}
    cpu: dict[str, dict[str, list[float]]] = {r: {n: [] for n in names} for r in args.rows}
    hint: dict[str, float] = {r: 20000.0 for r in args.rows}
    for row in args.rows:  # warm both: parsed certificates, upstream connections
        for name in names:
            port, _ = sides[name]
            hint[row] = measure(row, port, args.hosts, 1, hint[row])[0] or hint[row]
    for k in range(args.rounds):
        for row in args.rows:
            for name in alternating(names, k):
                port, master = sides[name]
                before = cpu_seconds(master)
                rate, n = measure(row, port, args.hosts, args.seconds, hint[row])
                used = cpu_seconds(master) - before
                hint[row] = rate or hint[row]  # a failed run (0) sizes nothing
                rates[row][name].append(rate)
                cpu[row][name].append(used / max(n, 1) * 1e6)
    out: dict[str, Any] = {"rows": {}}
    for row in args.rows:
        f, h = rates[row]["ferryman"], rates[row]["handwritten"]
        fc, hc = cpu[row]["ferryman"], cpu[row]["handwritten"]
        out["rows"][row] = {
            "ferryman_rate": statistics.median(f),
            "handwritten_rate": statistics.median(h),
            "ratio": statistics.median(a / b for a, b in zip(f, h, strict=True)),
            "ferryman_cpu_us": statistics.median(fc),
            "handwritten_cpu_us": statistics.median(hc),
            # handwritten CPU / ferryman CPU: like the rate ratio, 1.0 is par, higher is better
            "cpu_ratio": statistics.median(b / a for a, b in zip(fc, hc, strict=True) if a),
            "raw": {"rates": rates[row], "cpu_us": cpu[row]},
        }
    return out


if __name__ == "__main__":
    main()
