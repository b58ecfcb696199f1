"""What egressMTLS would cost as NGINX directives: the reload time of N locations
each with its own trusted CA file, against N plain locations.

    .venv/bin/python -m bench.egress_reload [--count 1000] [--rounds 3]

``proxy_ssl_trusted_certificate``, ``proxy_ssl_verify``, ``proxy_ssl_verify_depth``,
``proxy_ssl_protocols``, ``proxy_ssl_ciphers``, ``proxy_ssl_session_reuse`` and
``proxy_ssl_server_name`` take no variables: a policy verifying its backend
against its own CAs is a location of its own (NIC writes them into each
VirtualServer's locations), and NGINX builds one OpenSSL context per such
location when it loads the configuration. This bench renders what that would be
for ferryman (one named location per distinct egress configuration, the client
certificate still from a variable) and measures, with NGINX alone:

- ``nginx -t`` (parse, build every context, load every CA file);
- a reload: from SIGHUP to a worker of the new configuration answering.

Both for N such locations and for N locations without TLS, so the difference
is the price of the directives. Numbers on a shared 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from bench.processes import free_port
from testkit.pki import authority

MAIN = """
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
worker_processes 2;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {dir}/tmp;
    proxy_temp_path {dir}/tmp;
    upstream backend_tls {{ server 127.0.0.1:9; }}
    server {{
        listen 127.0.0.1:{port};
        location = /generation {{ return 200 "{generation}"; }}
{locations}
    }}
}}
"""

TLS_LOCATION = """
        location @egress_{i} {{
            proxy_pass https://backend_tls;
            proxy_ssl_certificate $ferryman_egress_cert;
            proxy_ssl_certificate_key $ferryman_egress_key;
            proxy_ssl_trusted_certificate {dir}/ca-{i}.crt;
            proxy_ssl_verify on;
            proxy_ssl_verify_depth 2;
            proxy_ssl_protocols TLSv1.2 TLSv1.3;
            proxy_ssl_ciphers DEFAULT;
            proxy_ssl_session_reuse on;
            proxy_ssl_server_name on;
            proxy_ssl_name $ferryman_ssl_name;
        }}"""

PLAIN_LOCATION = """
        location @plain_{i} {{
            proxy_pass http://backend_tls;
        }}"""


def _write(work: Path, count: int, tls: bool, generation: int, port: int) -> Path:
    template = TLS_LOCATION if tls else PLAIN_LOCATION
    locations = "".join(template.format(i=i, dir=work) for i in range(count))
    conf = work / "nginx.conf"
    text = MAIN.format(dir=work, port=port, generation=generation, locations=locations)
    # The variables the TLS locations name exist (as the slow path sets them).
    sets = "set $ferryman_egress_cert ''; set $ferryman_egress_key ''; set $ferryman_ssl_name '';"
    conf.write_text(text.replace("listen 127.0.0.1", sets + "\n        listen 127.0.0.1", 1))
    return conf


def _generation(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/generation", timeout=1) as r:
            return str(r.read().decode())
    except OSError:
        return ""


def _measure(count: int, tls: bool, rounds: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        (work / "tmp").mkdir()
        if tls:
            # Distinct CAs, as distinct policies' Secrets would be (a few reused
            # certificates: generating 1,000 keys would time the bench, not NGINX).
            pems = [authority(f"bench-ca-{i % 16}").cert_pem for i in range(count)]
            for i, pem in enumerate(pems):
                (work / f"ca-{i}.crt").write_bytes(pem)
        port = free_port()
        conf = _write(work, count, tls, 0, port)
        started = time.monotonic()
        subprocess.run(["nginx", "-t", "-q", "-p", str(work), "-c", str(conf)], check=True)
        check_s = time.monotonic() - started
        proc = subprocess.Popen(["nginx", "-p", str(work), "-c", str(conf), "-g", "daemon off;"])
        try:
            while _generation(port) != "0":
                time.sleep(0.05)
            reloads = []
            for generation in range(1, rounds + 1):
                _write(work, count, tls, generation, port)
                started = time.monotonic()
                proc.send_signal(1)  # SIGHUP
                while _generation(port) != str(generation):
                    time.sleep(0.005)
                reloads.append(time.monotonic() - started)
        finally:
            proc.terminate()
            proc.wait(30)
        return {"nginx_t_s": round(check_s, 3), "reload_s": round(statistics.median(reloads), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    result = {
        "locations": args.count,
        "egress_tls": _measure(args.count, True, args.rounds),
        "plain": _measure(args.count, False, args.rounds),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
