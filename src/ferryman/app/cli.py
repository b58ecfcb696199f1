"""The ``ferryman`` command. Flag names follow NIC's where NIC has the flag; NIC's own
command line (Go's -flag=value, its names) runs it too (docs/from-nic.md)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import textwrap
from pathlib import Path
from typing import NoReturn

from ferryman import __version__
from ferryman.app import (
    cluster_flags,
    completion,
    flag_settings,
    flag_types,
    migrate_command,
    nic_flags,
    wiring,
)
from ferryman.app import root as app
from ferryman.engine.settings import SettingsError
from ferryman.machines import command as machine_controller
from ferryman.observability import collector, logs
from ferryman.resources import validation


class _Parser(argparse.ArgumentParser):
    """A wrong flag or value is one line and exit code 2, not the whole usage."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


class _Help(argparse.HelpFormatter):
    """Every flag's help ends with its default, unless it already names one."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if (
            "default" in text
            or action.required
            or action.default is argparse.SUPPRESS
            or not action.option_strings
        ):
            return text
        if action.nargs == 0:  # store_true
            return f"{text} (default: off)"
        default = action.default
        if isinstance(default, tuple):
            default = ",".join(default)
        return f"{text} (default: {default})"

    def _split_lines(self, text: str, width: int) -> list[str]:
        # Paths and flags in the help stay whole.
        return textwrap.wrap(text, width, break_on_hyphens=False, break_long_words=False)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        lines = self._split_lines(" ".join(text.split()), width - len(indent))
        return "\n".join(indent + line for line in lines)


def _common(p: argparse.ArgumentParser, *, render: bool = False) -> None:
    serve = p.add_argument_group("what is served")
    engine = p.add_argument_group("NGINX's configuration")
    serve.add_argument(
        "--manifests",
        type=flag_types.existing_dir,
        metavar="DIR",
        required=render,
        help="the YAML files to render"
        if render
        else "manifests mode: serve the YAML files in DIR, watched for changes "
        "(default: none, Kubernetes mode)",
    )
    serve.add_argument(
        "--http-port",
        type=flag_types.listen_port,
        default=80,
        metavar="PORT",
        help="NGINX's HTTP listener",
    )
    serve.add_argument(
        "--https-port",
        type=flag_types.listen_port,
        default=443,
        metavar="PORT",
        help="NGINX's HTTPS listener",
    )
    serve.add_argument(
        "--ingress-class",
        default="ferryman",
        metavar="NAME",
        help="IngressClass to serve (NIC's command line, with no subcommand: nginx)",
    )
    serve.add_argument(
        "--global-configuration",
        type=flag_types.namespaced_name,
        metavar="NAMESPACE/NAME",
        help="NIC's GlobalConfiguration: the TCP/UDP listeners TransportServers use "
        "(default: none)",
    )
    serve.add_argument(
        "--default-server-tls-secret",
        type=flag_types.namespaced_name,
        metavar="NAMESPACE/NAME",
        help="the kubernetes.io/tls Secret whose certificate the default server presents "
        "(TLS handshakes whose SNI names no served host, or that send none); changes apply "
        "without a reload (default: none, such handshakes are rejected)",
    )
    serve.add_argument(
        "--wildcard-tls-secret",
        type=flag_types.namespaced_name,
        metavar="NAMESPACE/NAME",
        help="the kubernetes.io/tls Secret for every Ingress TLS host without a secretName "
        "and every VirtualServer whose tls names no secret (default: none)",
    )
    serve.add_argument(
        "--enable-gateway-api",
        action="store_true",
        help="serve Gateway API Gateways and HTTPRoutes of the GatewayClasses whose "
        "controllerName is --gateway-controller-name",
    )
    serve.add_argument(
        "--gateway-controller-name",
        type=flag_types.gateway_controller_name,
        default="ferryman.io/gateway-controller",
        metavar="DOMAIN/PATH",
        help="the GatewayClass controllerName ferryman answers to",
    )
    serve.add_argument(
        "--gateway-addresses",
        type=flag_types.address_pool,
        default=(),
        metavar="FIRST-LAST",
        help="IPv4 addresses Gateways take one each (their listeners listen there and "
        "their status shows it), e.g. 10.0.0.10-10.0.0.20; default: every Gateway "
        "listens on all addresses",
    )
    serve.add_argument(
        "--enable-tls-passthrough",
        # ingress-nginx's name for it (its ssl-passthrough annotation's flag).
        "--enable-ssl-passthrough",
        action="store_true",
        help="TransportServers on the built-in tls-passthrough listener, and Ingresses "
        "with nginx.ingress.kubernetes.io/ssl-passthrough: TLS connections on the HTTPS "
        "port go by SNI name to their backends, undecrypted",
    )
    serve.add_argument(
        "--disable-ipv6",
        action="store_true",
        help="public listeners (HTTP, HTTPS, listen-ports, GlobalConfiguration, Gateway, "
        "stub_status) on IPv4 only; by default each also listens on IPv6 ([::]), unless "
        "the machine has no IPv6",
    )
    engine.add_argument(
        "--nginx-modules-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="where NGINX's dynamic modules (Lua, stream, ngx_http_ferryman_module) are "
        "(default: beside --nginx-binary when its build keeps them there, as "
        "scripts/build-nginx.sh's does; else /usr/lib/nginx/modules)",
    )
    engine.add_argument(
        "--nginx-configmaps",
        type=flag_types.namespaced_name,
        metavar="NAMESPACE/NAME",
        help="NIC's ConfigMap of NGINX settings (worker-processes, log-format, "
        "proxy-read-timeout, ...; docs/operations.md lists the keys); in manifests mode "
        "read from DIR (default: none)",
    )
    engine.add_argument(
        "--ingress-nginx-configmap",
        type=flag_types.namespaced_name,
        metavar="NAMESPACE/NAME",
        help="ingress-nginx's ConfigMap, for a cluster moving from it: its keys that "
        "have a NIC equivalent (proxy-body-size, use-forwarded-headers, hsts, "
        "log-format-upstream, ...) apply, under --nginx-configmaps' (docs/ingress-nginx.md)",
    )
    engine.add_argument(
        "--data-plane",
        choices=("nginx", "angie"),
        default="nginx",
        help="the server: nginx (--nginx-binary) or angie (--data-plane-binary, default "
        "angie); both run the same records data plane (no reloads for resources), Angie "
        "from a build with the Lua runtime and ferryman's modules beside its binary "
        "(scripts/build-angie.sh)",
    )
    # Angie's classic flavour resolved its peers through ferryman's DNS server on
    # this port; Angie now runs the records data plane. Still accepted, so a
    # deployment that sets it starts; run says once that it is ignored.
    engine.add_argument("--angie-dns-port", type=flag_types.port, default=0, help=argparse.SUPPRESS)


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="ferryman", description=__doc__, formatter_class=_Help)
    p.add_argument("--version", action="version", version=f"ferryman {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="run the controller and its NGINX", formatter_class=_Help)
    _common(r)
    kube = r.add_argument_group("Kubernetes mode")
    process = r.add_argument_group("the NGINX process and its memory")
    probes = r.add_argument_group("probes, status and metrics")
    requests = r.add_argument_group("requests")
    kube.add_argument(
        "--kubeconfig",
        type=flag_types.readable_file,
        metavar="PATH",
        help="Kubernetes mode (no --manifests): kubeconfig file (default: $KUBECONFIG, "
        "~/.kube/config, then the in-cluster service account)",
    )
    process.add_argument(
        "--state-dir",
        type=Path,
        default=Path("/var/lib/ferryman"),
        metavar="DIR",
        help="NGINX's configuration, certificates and sockets (made 0711)",
    )
    probes.add_argument(
        "--ready-port",
        type=flag_types.port,
        default=8081,
        metavar="PORT",
        help="serves GET /nginx-ready on this port",
    )
    probes.add_argument(
        "--metrics-port",
        type=flag_types.port,
        default=9113,
        metavar="PORT",
        help="serves GET /metrics; 0 disables",
    )
    process.add_argument(
        "--nginx-binary",
        default="nginx",
        metavar="PATH",
        help="the NGINX to run (--data-plane nginx)",
    )
    process.add_argument(
        "--data-plane-binary",
        default=None,
        metavar="PATH",
        help="the data plane's binary (default: --nginx-binary for nginx, angie for angie)",
    )
    process.add_argument(
        "--nginx-reload-timeout",
        type=flag_types.seconds,
        default=60.0,
        metavar="SECONDS",
        help="seconds to wait for NGINX to confirm a reload (NIC's flag takes ms if > 1000)",
    )
    process.add_argument(
        "--worker-processes",
        type=flag_types.checked(validation.worker_processes),
        default="auto",
        metavar="N",
        help="NGINX worker_processes: auto or a number",
    )
    process.add_argument(
        "--worker-shutdown-timeout",
        type=flag_types.checked(validation.nginx_time),
        default=None,
        metavar="TIME",
        help="NGINX worker_shutdown_timeout: bound on draining old workers (default: none)",
    )
    process.add_argument(
        "--shutdown-grace-period",
        type=flag_types.non_negative_seconds,
        default=0.0,
        metavar="SECONDS",
        help="on SIGTERM, /nginx-ready answers 503 at once but NGINX keeps serving this "
        "long, so load balancers move away first; then it quits gracefully (in-flight "
        "requests finish). A second signal ends the wait (default: 0, quit at once)",
    )
    kube.add_argument(
        "--enable-cert-manager",
        action="store_true",
        help="make the cert-manager Certificate a VirtualServer's tls.cert-manager asks "
        "for (NIC's flag; without it that field rejects the VirtualServer)",
    )
    kube.add_argument(
        "--watch-namespace",
        default="",
        metavar="NAMESPACES",
        help="comma-separated namespaces to watch (default: all)",
    )
    kube.add_argument(
        "--report-ingress-status",
        action="store_true",
        help="Kubernetes mode: write status.loadBalancer of served Ingresses",
    )
    kube.add_argument(
        "--external-service",
        metavar="NAMESPACE/NAME",
        help="ferryman's Service, whose addresses Ingress status shows (default: none)",
    )
    kube.add_argument(
        "--ingress-address",
        default="",
        metavar="ADDRESSES",
        help="comma-separated addresses for Ingress status (default: none)",
    )
    probes.add_argument(
        "--nginx-status-port",
        type=flag_types.port,
        default=0,
        metavar="PORT",
        help="serve NGINX stub_status at /stub_status on this port (0: off; NIC uses 8080)",
    )
    probes.add_argument(
        "--nginx-status-allow-cidrs",
        type=flag_types.cidrs,
        default=("127.0.0.1/32", "::1/128"),
        metavar="CIDRS",
        help="comma-separated networks allowed to read the status port",
    )
    probes.add_argument(
        "--health-status",
        action="store_true",
        help="answer 200 on --health-status-uri for hosts no Ingress routes",
    )
    probes.add_argument(
        "--health-status-uri",
        type=flag_types.uri,
        default="/nginx-health",
        metavar="PATH",
        help="the path --health-status answers on",
    )
    probes.add_argument(
        "--enable-latency-metrics",
        action="store_true",
        help="export nginx_ingress_controller_upstream_server_response_latency_ms",
    )
    requests.add_argument(
        "--compute-full-forwarded-for",
        type=flag_types.boolean,
        default=True,
        metavar="BOOL",
        help="append the client's address to its X-Forwarded-For (true, NIC's way); false "
        "replaces the header with the client's address (default true)",
    )
    requests.add_argument(
        "--strict-request-paths",
        action="store_true",
        help="answer 400 for request paths a backend may read otherwise than the Ingress "
        "paths were matched (dot segments, '..;', encoded '.', '/', '\\', ';'; default off)",
    )
    process.add_argument(
        "--records-memory-size",
        type=flag_types.memory_size,
        default="128m",
        metavar="SIZE",
        help="NGINX shared memory for pushed hosts, certificates and endpoint sets "
        "(NGINX size, at least 1m; default 128m)",
    )
    process.add_argument(
        "--max-record-bytes",
        type=flag_types.positive,
        default=512 * 1024,
        metavar="BYTES",
        help="largest record (one host's routes, one certificate, one endpoint set) "
        "pushed to NGINX; its resource is rejected above it (default 524288)",
    )
    kube.add_argument(
        "--allowed-host-suffixes",
        type=flag_types.host_suffixes,
        default=(),
        metavar="NAMESPACE=SUFFIX,...",
        help="opt-in host policy: NAMESPACE=SUFFIX pairs, comma-separated (repeat a "
        "namespace for more suffixes; SUFFIX * allows every host); a namespace claims "
        "only hosts equal to or under its suffixes, an unlisted one none (default: no policy)",
    )
    cluster_flags.add(r)
    flag_types.add_log_flags(r)

    rd = sub.add_parser(
        "render", help="render the NGINX configuration once and exit", formatter_class=_Help
    )
    _common(rd, render=True)
    rd.add_argument(
        "--output",
        type=Path,
        required=True,
        metavar="DIR",
        help="where the configuration, records.txt and routes.txt are written",
    )

    mc = sub.add_parser(
        "machine-controller",
        help="the reference machine deletion controller (lifecycle hooks)",
        formatter_class=_Help,
    )
    machine_controller.add_arguments(mc)
    migrate_command.add_parser(sub, _Help)
    completion.add_parser(sub)
    return p


def main(argv: list[str] | None = None, kinds: wiring.Kinds = wiring.BUILT_IN) -> int:
    """``kinds``: what is served (a test registers a kind of its own)."""
    args = nic_flags.parse_args(parser(), sys.argv[1:] if argv is None else argv)
    if args.command != "run":  # run resumes it once started (collector)
        collector.resume()
    if args.command == "machine-controller":
        return machine_controller.main(args)
    if args.command == "migrate":
        return migrate_command.main(args)
    if args.command == "completion":
        print(completion.script(parser(), args.shell))
        return 0
    if args.command == "render":
        from ferryman.app import render  # with manifests mode's PyYAML: not run's

        logs.setup("text", "warning")
        settings = flag_settings.render_settings(args)
        try:
            notes: list[str] = []
            warnings: list[str] = []
            problems = asyncio.run(
                render.render(settings, args.output, notes, kinds, warnings=warnings)
            )
        except SettingsError as e:
            print(f"ferryman render: {e}", file=sys.stderr)
            return 2
        for note in notes:
            print(note)
        # What NIC users read in nginx -T: every route, from the records written.
        print((args.output / render.ROUTES_FILE).read_text(encoding="utf-8"), end="")
        for warning in warnings:
            print(f"warning: {warning}", file=sys.stderr)
        for problem in problems:
            print(problem, file=sys.stderr)
        return 1 if problems else 0

    logs.setup(args.log_format, args.log_level)
    if args.angie_dns_port:
        logging.getLogger("ferryman").warning(
            "--angie-dns-port is ignored: Angie runs the records data plane, with no DNS server"
        )
    if (error := flag_settings.run_combination_error(args)) is not None:
        print(error, file=sys.stderr)
        return 2
    settings = flag_settings.run_settings(args)
    try:
        return asyncio.run(app.run(settings, kinds))
    except SettingsError as e:
        print(f"ferryman run: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
