"""The ``ferryman`` command. Flag names follow NIC's where NIC has the flag."""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import os
import sys
from collections.abc import Callable
from pathlib import Path

from ferryman import __version__, app, logs
from ferryman.configs.model import size_bytes
from ferryman.resources import validation
from ferryman.settings import Settings


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--manifests", type=Path, help="serve the manifests in DIR (no cluster)")
    p.add_argument("--http-port", type=int, default=80)
    p.add_argument("--https-port", type=int, default=443)
    p.add_argument("--ingress-class", default="ferryman", help="IngressClass to serve")
    p.add_argument(
        "--nginx-modules-dir",
        type=Path,
        default=Path("/usr/lib/nginx/modules"),
        help="where NGINX's dynamic modules (Lua, stream) are",
    )
    p.add_argument(
        "--data-plane",
        choices=("nginx", "angie"),
        default="nginx",
        help="nginx: NGINX with the Lua router (no reloads for resources); angie: Angie "
        "with classic configuration (reloads for hosts and paths, DNS for endpoints)",
    )
    p.add_argument(
        "--angie-dns-port",
        type=_port,
        default=0,
        help="Angie: 127.0.0.1 port (UDP and TCP) of ferryman's DNS server for upstream "
        "resolve (default 0: a free port chosen at start)",
    )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ferryman", description=__doc__)
    p.add_argument("--version", action="version", version=f"ferryman {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="run the controller and its NGINX")
    _common(r)
    r.add_argument(
        "--kubeconfig",
        help="Kubernetes mode (no --manifests): kubeconfig file; default $KUBECONFIG, "
        "~/.kube/config, then the in-cluster service account",
    )
    r.add_argument("--state-dir", type=Path, default=Path("/var/lib/ferryman"))
    r.add_argument("--ready-port", type=int, default=8081, help="serves /nginx-ready")
    r.add_argument("--metrics-port", type=int, default=9113, help="serves /metrics; 0 disables")
    r.add_argument("--nginx-binary", default="nginx", help="the NGINX to run (--data-plane nginx)")
    r.add_argument(
        "--data-plane-binary",
        default=None,
        help="the data plane's binary (default: --nginx-binary for nginx, angie for angie)",
    )
    r.add_argument(
        "--nginx-reload-timeout",
        type=float,
        default=60.0,
        help="seconds to wait for NGINX to confirm a reload (NIC's flag takes ms if > 1000)",
    )
    r.add_argument("--worker-processes", type=_checked(validation.worker_processes), default="auto")
    r.add_argument(
        "--worker-shutdown-timeout",
        type=_checked(validation.nginx_time),
        default=None,
        help="NGINX worker_shutdown_timeout: bound on draining old workers (default: none)",
    )
    r.add_argument(
        "--watch-namespace",
        default="",
        help="comma-separated namespaces to watch (default: all)",
    )
    r.add_argument(
        "--report-ingress-status",
        action="store_true",
        help="Kubernetes mode: write status.loadBalancer of served Ingresses",
    )
    r.add_argument("--external-service", help="namespace/name of ferryman's Service (status)")
    r.add_argument(
        "--ingress-address", default="", help="comma-separated addresses for Ingress status"
    )
    r.add_argument(
        "--enable-leader-election",
        type=_boolean,
        default=True,
        help="only the Lease holder writes status and Events (default true)",
    )
    r.add_argument("--leader-election-lock-name", default="ferryman-leader-election")
    r.add_argument(
        "--leader-election-namespace",
        default=os.environ.get("POD_NAMESPACE", "default"),
        help="namespace of the Lease (default: $POD_NAMESPACE, else default)",
    )
    # Lease timings (NIC's defaults); tests shorten them.
    r.add_argument("--leader-election-lease-duration", type=float, default=30.0)
    r.add_argument("--leader-election-renew-deadline", type=float, default=15.0)
    r.add_argument("--leader-election-retry-period", type=float, default=7.5)
    r.add_argument(
        "--nginx-status-port",
        type=int,
        default=0,
        help="serve NGINX stub_status at /stub_status on this port (0: off; NIC uses 8080)",
    )
    r.add_argument(
        "--nginx-status-allow-cidrs",
        type=_cidrs,
        default=("127.0.0.1/32", "::1/128"),
        help="comma-separated networks allowed to read the status port",
    )
    r.add_argument(
        "--health-status",
        action="store_true",
        help="answer 200 on --health-status-uri for hosts no Ingress routes",
    )
    r.add_argument("--health-status-uri", type=_uri, default="/nginx-health")
    r.add_argument(
        "--enable-latency-metrics",
        action="store_true",
        help="export nginx_ingress_controller_upstream_server_response_latency_ms",
    )
    r.add_argument(
        "--records-memory-size",
        type=_memory_size,
        default="128m",
        help="NGINX shared memory for pushed hosts, certificates and endpoint sets "
        "(NGINX size, at least 1m; default 128m)",
    )
    r.add_argument(
        "--max-record-bytes",
        type=_positive,
        default=512 * 1024,
        help="largest record (one host's routes, one certificate, one endpoint set) "
        "pushed to NGINX; its resource is rejected above it (default 524288)",
    )
    r.add_argument(
        "--allowed-host-suffixes",
        type=_host_suffixes,
        default=(),
        help="opt-in host policy: NAMESPACE=SUFFIX pairs, comma-separated (repeat a "
        "namespace for more suffixes; SUFFIX * allows every host); a namespace claims "
        "only hosts equal to or under its suffixes, an unlisted one none (default: no policy)",
    )
    r.add_argument("--log-format", choices=("text", "json"), default="text")
    r.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default="info")

    rd = sub.add_parser("render", help="render the NGINX configuration once and exit")
    _common(rd)
    rd.add_argument("--output", type=Path, required=True)
    return p


def _port(value: str) -> int:
    try:
        port = int(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{value!r} is not a port number") from e
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{value!r} is not a port number")
    return port


def _memory_size(value: str) -> str:
    """An NGINX size for the records' shared memory; nginx.conf gets it verbatim."""
    try:
        size = size_bytes(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from e
    if size < 1 << 20:
        raise argparse.ArgumentTypeError(f"{value!r} is less than 1m")
    return value


def _positive(value: str) -> int:
    try:
        number = int(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from e
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not positive")
    return number


def _host_suffixes(value: str) -> tuple[tuple[str, str], ...]:
    pairs = []
    for item in (i.strip() for i in value.split(",") if i.strip()):
        namespace, sep, suffix = item.partition("=")
        problem = (
            "is not NAMESPACE=SUFFIX"
            if not sep
            else validation.dns1123_label(namespace)
            or (validation.dns1123_subdomain(suffix) if suffix != "*" else None)
        )
        if problem:
            raise argparse.ArgumentTypeError(f"{item!r} {problem}")
        pairs.append((namespace, suffix))
    return tuple(pairs)


def _cidrs(value: str) -> tuple[str, ...]:
    """Networks as NGINX's allow directive reads them, normalised by ipaddress."""
    try:
        return tuple(str(ipaddress.ip_network(c.strip(), strict=False)) for c in value.split(","))
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from e


def _checked(check: Callable[[str], str | None]) -> Callable[[str], str]:
    """An argparse type from a validation function: flags reach nginx.conf too."""

    def parse(value: str) -> str:
        if problem := check(value):
            raise argparse.ArgumentTypeError(f"{value!r} {problem}")
        return value

    return parse


def _uri(value: str) -> str:
    if problem := validation.http_path(value, "Exact"):
        raise argparse.ArgumentTypeError(f"{value!r} {problem}")
    return value


def _boolean(value: str) -> bool:
    if value.lower() in ("true", "1", "yes"):
        return True
    if value.lower() in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"{value!r} is not true or false")


def _binary(args: argparse.Namespace) -> str:
    if args.data_plane_binary:
        return str(args.data_plane_binary)
    return str(args.nginx_binary) if args.data_plane == "nginx" else "angie"


def _reload_timeout(value: float) -> float:
    # NIC's --nginx-reload-timeout is in milliseconds; accept both forms.
    return value / 1000 if value > 1000 else value


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command == "render":
        logs.setup("text", "warning")
        if args.manifests is None:
            print("ferryman render: --manifests is required", file=sys.stderr)
            return 2
        settings = Settings(
            state_dir=args.output,
            manifests=args.manifests,
            http_port=args.http_port,
            https_port=args.https_port,
            ingress_class=args.ingress_class,
            nginx_modules_dir=args.nginx_modules_dir,
            angie_dns_port=args.angie_dns_port,
        )
        try:
            problems = asyncio.run(app.render(settings, args.output, args.data_plane))
        except app.SettingsError as e:
            print(f"ferryman render: {e}", file=sys.stderr)
            return 2
        for problem in problems:
            print(problem, file=sys.stderr)
        return 1 if problems else 0

    logs.setup(args.log_format, args.log_level)
    settings = Settings(
        state_dir=args.state_dir,
        manifests=args.manifests,
        kubeconfig=args.kubeconfig,
        http_port=args.http_port,
        https_port=args.https_port,
        ready_port=args.ready_port,
        metrics_port=args.metrics_port,
        ingress_class=args.ingress_class,
        nginx_binary=_binary(args),
        nginx_reload_timeout=_reload_timeout(args.nginx_reload_timeout),
        nginx_modules_dir=args.nginx_modules_dir,
        worker_processes=args.worker_processes,
        worker_shutdown_timeout=args.worker_shutdown_timeout or "",
        watch_namespaces=tuple(n for n in args.watch_namespace.split(",") if n),
        report_ingress_status=args.report_ingress_status,
        external_service=args.external_service,
        ingress_addresses=tuple(a for a in args.ingress_address.split(",") if a),
        leader_election=args.enable_leader_election,
        leader_lock_name=args.leader_election_lock_name,
        leader_lock_namespace=args.leader_election_namespace,
        lease_duration=args.leader_election_lease_duration,
        renew_deadline=args.leader_election_renew_deadline,
        retry_period=args.leader_election_retry_period,
        nginx_status_port=args.nginx_status_port,
        nginx_status_allow=args.nginx_status_allow_cidrs,
        health_uri=args.health_status_uri if args.health_status else "",
        latency_metrics=args.enable_latency_metrics,
        angie_dns_port=args.angie_dns_port,
        shared_dict_size=args.records_memory_size,
        max_record_bytes=args.max_record_bytes,
        allowed_host_suffixes=args.allowed_host_suffixes,
    )
    try:
        return asyncio.run(app.run(settings, args.data_plane))
    except app.SettingsError as e:
        print(f"ferryman run: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
