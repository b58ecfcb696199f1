"""Parsed ``ferryman`` flags -> ``Settings``: the flag combinations refused, and
what each flag becomes.

Apart from cli.py, which defines the flags themselves (names, defaults, help: a
contract other tools rely on), so that the parser stays one readable list and
what the flags mean together (NIC's millisecond reload timeout, the binary a data
plane runs, a webhook implying gated routing) is read here.
"""

from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path

from ferryman.app.build_tree import SYSTEM_MODULES, beside
from ferryman.engine.settings import (
    DrainSettings,
    GatewaySettings,
    KubernetesSettings,
    LeaderElectionSettings,
    ListenSettings,
    NginxSettings,
    ReadinessGateSettings,
    Settings,
    TLSSettings,
    TransportSettings,
)


def data_plane_binary(args: argparse.Namespace) -> str:
    """The data plane's binary: --data-plane-binary, else --nginx-binary for
    nginx, angie for angie."""
    if args.data_plane_binary:
        return str(args.data_plane_binary)
    return str(args.nginx_binary) if args.data_plane == "nginx" else "angie"


def _build_tree(args: argparse.Namespace) -> tuple[Path, Path | None]:
    """--nginx-modules-dir, else the modules (and Lua libraries) beside the
    binary's build, else the system's (app/build_tree.py)."""
    tree = beside(data_plane_binary(args)) if args.nginx_modules_dir is None else None
    if tree is not None:
        return tree.modules, tree.lua
    return args.nginx_modules_dir or SYSTEM_MODULES, None


def _reload_timeout(value: float) -> float:
    # NIC's --nginx-reload-timeout is in milliseconds; accept both forms.
    return value / 1000 if value > 1000 else value


def render_settings(args: argparse.Namespace) -> Settings:
    """``ferryman render``'s settings: the configuration goes to --output."""
    return Settings(
        state_dir=args.output,
        manifests=args.manifests,
        ingress_class=args.ingress_class,
        listen=ListenSettings(
            http_port=args.http_port,
            https_port=args.https_port,
            disable_ipv6=args.disable_ipv6,
        ),
        nginx=NginxSettings(
            modules_dir=args.nginx_modules_dir or SYSTEM_MODULES,
            configmap=args.nginx_configmaps,
            ingress_nginx_configmap=args.ingress_nginx_configmap,
        ),
        tls=_tls(args),
        transport=_transport(args),
        gateway=_gateway(args),
    )


# The groups ``render`` and ``run`` take alike, so the two cannot drift apart.
def _tls(args: argparse.Namespace) -> TLSSettings:
    return TLSSettings(
        default_server_secret=args.default_server_tls_secret,
        wildcard_secret=args.wildcard_tls_secret,
    )


def _transport(args: argparse.Namespace) -> TransportSettings:
    return TransportSettings(
        global_configuration=args.global_configuration,
        tls_passthrough=args.enable_tls_passthrough,
    )


def _gateway(args: argparse.Namespace) -> GatewaySettings:
    return GatewaySettings(
        enabled=args.enable_gateway_api,
        controller_name=args.gateway_controller_name,
        addresses=args.gateway_addresses,
    )


def run_combination_error(args: argparse.Namespace) -> str | None:
    """Why ``ferryman run``'s flags do not go together (the line to print), or None."""
    if (
        args.data_plane == "angie"
        and args.nginx_modules_dir is None
        and beside(binary := data_plane_binary(args)) is None
    ):
        # Debian NGINX's modules (the default directory) do not load into Angie.
        what = (
            "is not found"
            if shutil.which(binary) is None
            else "has no Lua runtime and ferryman's modules beside it "
            "(../modules/ngx_http_lua_module.so)"
        )
        return (
            f"ferryman run: --data-plane angie: {binary} {what}: run the Angie "
            "scripts/build-angie.sh builds, or name its modules with --nginx-modules-dir"
        )
    if args.machine_lifecycle_hooks != "off" and args.manifests is not None:
        # Hooks live on Machines in the API: a silently ignored safety net is worse.
        return "ferryman run: --machine-lifecycle-hooks needs Kubernetes mode"
    if args.readiness_gate_webhook_port and not args.readiness_gate_webhook_cert_secret:
        return (
            "ferryman run: --readiness-gate-webhook-port needs --readiness-gate-webhook-cert-secret"
        )
    return None


def run_settings(args: argparse.Namespace) -> Settings:
    """``ferryman run``'s settings (its flags checked by ``run_combination_error``)."""
    return Settings(
        state_dir=args.state_dir,
        manifests=args.manifests,
        ingress_class=args.ingress_class,
        allowed_host_suffixes=args.allowed_host_suffixes,
        listen=ListenSettings(
            http_port=args.http_port,
            https_port=args.https_port,
            ready_port=args.ready_port,
            metrics_port=args.metrics_port,
            disable_ipv6=args.disable_ipv6,
        ),
        nginx=_nginx(args),
        kubernetes=KubernetesSettings(
            kubeconfig=args.kubeconfig,
            watch_namespaces=tuple(n for n in args.watch_namespace.split(",") if n),
            report_status=args.report_ingress_status,
            external_service=args.external_service,
            ingress_addresses=tuple(a for a in args.ingress_address.split(",") if a),
            cert_manager=args.enable_cert_manager,
        ),
        leader_election=LeaderElectionSettings(
            enabled=args.enable_leader_election,
            lock_name=args.leader_election_lock_name,
            lock_namespace=args.leader_election_namespace,
            lease_duration=args.leader_election_lease_duration,
            renew_deadline=args.leader_election_renew_deadline,
            retry_period=args.leader_election_retry_period,
        ),
        gates=ReadinessGateSettings(
            # The webhook's gates hold pods back until ferryman routes to them: it
            # implies gated routing, or gated pods would never turn Ready.
            enabled=args.readiness_gates or bool(args.readiness_gate_webhook_port),
            timeout=args.readiness_gate_timeout,
            webhook_port=args.readiness_gate_webhook_port,
            webhook_cert_secret=args.readiness_gate_webhook_cert_secret,
            webhook_cert_hosts=args.readiness_gate_webhook_cert_hosts,
            webhook_configuration=args.readiness_gate_webhook_configuration,
        ),
        drain=DrainSettings(
            grace_period=args.shutdown_grace_period,
            machine_hooks=args.machine_lifecycle_hooks,
            machine_timeout=args.machine_drain_timeout,
            in_flight_timeout=args.drain_in_flight_timeout,
            node_name=os.environ.get("NODE_NAME", ""),
        ),
        tls=_tls(args),
        transport=_transport(args),
        gateway=_gateway(args),
    )


def _nginx(args: argparse.Namespace) -> NginxSettings:
    modules_dir, lua_dir = _build_tree(args)
    return NginxSettings(
        binary=data_plane_binary(args),
        reload_timeout=_reload_timeout(args.nginx_reload_timeout),
        modules_dir=modules_dir,
        lua_dir=lua_dir,
        worker_processes=args.worker_processes,
        worker_shutdown_timeout=args.worker_shutdown_timeout or "",
        shared_dict_size=args.records_memory_size,
        max_record_bytes=args.max_record_bytes,
        status_port=args.nginx_status_port,
        status_allow=args.nginx_status_allow_cidrs,
        health_uri=args.health_status_uri if args.health_status else "",
        latency_metrics=args.enable_latency_metrics,
        compute_full_forwarded_for=args.compute_full_forwarded_for,
        strict_request_paths=args.strict_request_paths,
        configmap=args.nginx_configmaps,
        ingress_nginx_configmap=args.ingress_nginx_configmap,
    )
