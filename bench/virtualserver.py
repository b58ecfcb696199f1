"""What a VirtualServer request costs: the same route served three ways in one run.

    .venv/bin/python -m bench.virtualserver [--seconds 5] [--rounds 6]

- an Ingress host (``app0.bench.test/p0``): the fast path, ngx_http_ferryman_module;
- a VirtualServer host (``vs0.bench.test/p0``, ``action.pass`` to the same Service,
  and ``vs1.bench.test/p0`` whose route first evaluates a header match and a
  50/50 split): routes ngx_http_ferryman_module serves itself (the F record,
  kinds/virtualserver/records/fast.py), the Lua slow path without it;
- a VirtualServer host (``vs2.bench.test/p0``) with a rateLimit Policy (one key,
  the client's address, for every request: the bucket every worker locks; a rate
  and burst no run reaches) and an accessControl Policy allowing the loopback: what a
  request's policies add to the slow path;
- a VirtualServer host (``vs3.bench.test/p0``) with an externalAuth Policy whose
  auth service is the same backends (``/auth`` answers 200): a subrequest per
  request, what NIC's auth_request costs too;
- an Ingress host (``app1.bench.test/p0``) with ``nginx.org/policies`` naming the
  accessControl Policy: the Lua slow path matching Ingress paths, then the policy;
- an Ingress host (``app2.bench.test/p0``) with ``nginx.org/proxy-read-timeout``
  and ``nginx.org/proxy-hide-headers``: the VirtualServer engine's V record
  (kinds/ingress/records/as_virtualserver.py);
- a hand-written NGINX configuration for the same route (bench/run.py's).

wrk ``-t2 -c64`` against each, back to back per round with the order rotating;
the ratios are medians of the rounds' ratios (a 2-core VM varies ±10% per run);
NGINX's CPU per request (master and workers) is the cost behind them.
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

from bench.processes import (
    alternating,
    bench_bed,
    cpu_seconds,
    free_port,
    ingress_docs,
    write_yaml,
    wrk,
)
from bench.run import WARM_UP_SECONDS, _hand_written


def _policies() -> list[dict[str, Any]]:
    def policy(name: str, **spec: Any) -> dict[str, Any]:
        md = {"name": name, "namespace": "default"}
        return {"apiVersion": "k8s.nginx.org/v1", "kind": "Policy", "metadata": md, "spec": spec}

    # NGINX's clock has milliseconds: requests within one need a burst, as with limit_req.
    limit = {
        "rate": "1000000r/s",
        "burst": 100000,
        "noDelay": True,
        "key": "${binary_remote_addr}",
        "zoneSize": "10M",
    }
    return [
        policy("limit", rateLimit=limit),
        policy("local", accessControl={"allow": ["127.0.0.0/8"]}),
        policy("ext", externalAuth={"authURI": "/auth", "authServiceName": "app0"}),
    ]


def _virtual_server(name: str, host: str, rich: bool) -> dict[str, Any]:
    route: dict[str, Any] = {"path": "/p0", "action": {"pass": "app"}}
    if rich:
        route = {
            "path": "/p0",
            "matches": [
                {"conditions": [{"header": "X-Canary", "value": "yes"}], "action": {"pass": "app"}}
            ],
            "splits": [
                {"weight": 50, "action": {"pass": "app"}},
                {"weight": 50, "action": {"pass": "app"}},
            ],
        }
    return {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "VirtualServer",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "host": host,
            "upstreams": [{"name": "app", "service": "app0", "port": 80}],
            "routes": [route],
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=6)
    args = ap.parse_args()
    with bench_bed("fbench-vs-") as (work, backends, f):
        ports = (backends.ports[0], backends.ports[1])
        write_yaml(f.manifests / "app0.yaml", ingress_docs(0, ports))
        guarded_ingress = ingress_docs(1, ports)
        guarded_ingress[0]["metadata"]["annotations"] = {"nginx.org/policies": "local"}
        write_yaml(f.manifests / "app1.yaml", guarded_ingress)
        annotated = ingress_docs(2, ports)
        annotated[0]["metadata"]["annotations"] = {
            "nginx.org/proxy-read-timeout": "30s",
            "nginx.org/proxy-hide-headers": "X-Powered-By",
        }
        write_yaml(f.manifests / "app2.yaml", annotated)
        write_yaml(f.manifests / "vs0.yaml", [_virtual_server("vs0", "vs0.bench.test", False)])
        write_yaml(f.manifests / "vs1.yaml", [_virtual_server("vs1", "vs1.bench.test", True)])
        guarded = _virtual_server("vs2", "vs2.bench.test", False)
        guarded["spec"]["policies"] = [{"name": "limit"}, {"name": "local"}]
        write_yaml(f.manifests / "vs2.yaml", [*_policies(), guarded])
        authed = _virtual_server("vs3", "vs3.bench.test", False)
        authed["spec"]["policies"] = [{"name": "ext"}]
        write_yaml(f.manifests / "vs3.yaml", [authed])
        f.start()
        port = free_port()
        plain = _hand_written(work, port, ports)
        master = int((f.workdir / "state" / "nginx.pid").read_text())
        targets = {
            "ingress_fast_path": (f.http_port, "app0.bench.test", master),
            "ingress_policies": (f.http_port, "app1.bench.test", master),
            "ingress_annotations": (f.http_port, "app2.bench.test", master),
            "virtualserver_pass": (f.http_port, "vs0.bench.test", master),
            "virtualserver_match_split": (f.http_port, "vs1.bench.test", master),
            "virtualserver_policies": (f.http_port, "vs2.bench.test", master),
            "virtualserver_external_auth": (f.http_port, "vs3.bench.test", master),
            "hand_written": (port, "app0.bench.test", plain.pid),
        }
        try:
            for target_port, host, _ in targets.values():
                wrk(f"http://127.0.0.1:{target_port}/p0/x", host, WARM_UP_SECONDS)
            rps: dict[str, list[float]] = {name: [] for name in targets}
            cpu_us: dict[str, list[float]] = {name: [] for name in targets}
            names = sorted(targets)
            for i in range(args.rounds):
                for name in alternating(names, i):
                    target_port, host, pid = targets[name]
                    before = cpu_seconds(pid)
                    run = wrk(f"http://127.0.0.1:{target_port}/p0/x", host, args.seconds)
                    used = cpu_seconds(pid) - before
                    if run["non_2xx"]:
                        raise RuntimeError(f"{name}: {run['non_2xx']:.0f} non-2xx answers")
                    rps[name].append(run["rps"])
                    cpu_us[name].append(used / (run["rps"] * args.seconds) * 1e6)
            base = rps["hand_written"]
            print(f"reloads: {f.reloads()}")
            for name in names:
                ratio = statistics.median(r / b for r, b in zip(rps[name], base, strict=True))
                print(
                    f"{name}: {statistics.median(rps[name]):.0f} req/s, "
                    f"{ratio:.3f} of the hand-written configuration, "
                    f"NGINX CPU {statistics.median(cpu_us[name]):.1f} us/request"
                )
        finally:
            plain.terminate()
            plain.wait(10)


if __name__ == "__main__":
    main()
