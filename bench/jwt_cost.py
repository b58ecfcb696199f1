"""What the jwt Policy costs per request: a VirtualServer route without a policy,
and the same route behind a jwt Policy with an HS256, an RS256 (2048-bit) and an
ES256 key, each request carrying a valid token (ferryman_jwt.lua: libcrypto through
LuaJIT's FFI, the JSON read in Lua).

    .venv/bin/python -m bench.jwt_cost [--seconds 5] [--rounds 3] [--tokens N]

``--tokens 1`` (the default): every request carries the same token, as a client
does, whose verified signature each worker remembers; ``--tokens 5000``: requests
cycle through 5,000 tokens (more than the 2,000 a worker remembers per key set),
so nearly every request verifies a signature.

wrk ``-t2 -c64`` against each in turn, the order rotating per round; prints
requests per second and NGINX's CPU per request (medians of the rounds), and the
reloads after start-up. On a shared 2-core machine: compare within one run.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.processes import (
    alternating,
    bench_bed,
    cpu_seconds,
    ingress_docs,
    write_yaml,
)
from testkit.jose import jwk, jwk_secret, jwks, token

ALGS = ("HS256", "RS256", "ES256")


def _vs(name: str, policy: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "host": f"{name}.bench.test",
        "upstreams": [{"name": "app", "service": "app0", "port": 80}],
        "routes": [{"path": "/p0", "action": {"pass": "app"}}],
    }
    if policy:
        spec["policies"] = [{"name": policy}]
    md = {"name": name, "namespace": "default"}
    return {"apiVersion": "k8s.nginx.org/v1", "kind": "VirtualServer", "metadata": md, "spec": spec}


def _policy(alg: str) -> dict[str, Any]:
    md = {"name": f"jwt-{alg.lower()}", "namespace": "default"}
    spec = {"jwt": {"realm": "bench", "secret": f"keys-{alg.lower()}"}}
    return {"apiVersion": "k8s.nginx.org/v1", "kind": "Policy", "metadata": md, "spec": spec}


def _script(work: Path, name: str, host: str, tokens: list[str]) -> Path:
    """A wrk script sending ``tokens`` in turn."""
    listed = ",\n".join(f'"{t}"' for t in tokens)
    path = work / f"{name}.lua"
    path.write_text(
        f"local tokens = {{{listed}}}\nlocal i = 0\n"
        "request = function()\n  i = i % #tokens + 1\n"
        f'  return wrk.format("GET", "/p0/x", {{ Host = "{host}", '
        'Authorization = "Bearer " .. tokens[i] })\nend\n'
    )
    return path


def _wrk(port: int, host: str, seconds: int, script: Path | None) -> tuple[float, float]:
    cmd = ["wrk", "-t2", "-c64", f"-d{seconds}s", "-H", f"Host: {host}"]
    if script is not None:
        cmd += ["-s", str(script)]
    out = subprocess.run(
        [*cmd, f"http://127.0.0.1:{port}/p0/x"], capture_output=True, text=True, check=True
    ).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    return rps, float(non2xx.group(1)) if non2xx else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=1)
    args = ap.parse_args()
    with bench_bed("fbench-jwt-") as (work, backends, f):
        write_yaml(f.manifests / "app0.yaml", ingress_docs(0, tuple(backends.ports[:2])))
        write_yaml(f.manifests / "plain.yaml", [_vs("plain", None)])
        targets: dict[str, tuple[str, Path | None]] = {"no_policy": ("plain.bench.test", None)}
        for alg in ALGS:
            name = alg.lower()
            docs = [
                jwk_secret(f"keys-{name}", jwks(jwk(alg, "k"))),
                _policy(alg),
                _vs(name, f"jwt-{name}"),
            ]
            write_yaml(f.manifests / f"{name}.yaml", docs)
            exp = int(time.time()) + 3600
            tokens = [token(alg, {"sub": f"u{i}", "exp": exp}, kid="k") for i in range(args.tokens)]
            host = f"{name}.bench.test"
            targets[f"jwt_{name}"] = (host, _script(work, name, host, tokens))
        f.start()
        master = int((f.workdir / "state" / "nginx.pid").read_text())
        for host, script in targets.values():
            _wrk(f.http_port, host, 2, script)
        rps: dict[str, list[float]] = {n: [] for n in targets}
        cpu_us: dict[str, list[float]] = {n: [] for n in targets}
        names = sorted(targets)
        for i in range(args.rounds):
            for name in alternating(names, i):
                host, script = targets[name]
                before = cpu_seconds(master)
                r, non2xx = _wrk(f.http_port, host, args.seconds, script)
                used = cpu_seconds(master) - before
                if non2xx:
                    raise RuntimeError(f"{name}: {non2xx:.0f} non-2xx answers")
                rps[name].append(r)
                cpu_us[name].append(used / (r * args.seconds) * 1e6)
        print(f"reloads: {f.reloads()}")
        for name in names:
            print(
                f"{name}: {statistics.median(rps[name]):.0f} req/s, "
                f"NGINX CPU {statistics.median(cpu_us[name]):.1f} us/request"
            )


if __name__ == "__main__":
    main()
