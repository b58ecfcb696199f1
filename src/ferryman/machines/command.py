"""``ferryman machine-controller``: its flags and its composition root.

The reference machine deletion controller, for tests and for clusters without
the OpenShift Machine API: it owns the deletion of ``machine.openshift.io/v1beta1``
Machines (deploy/crds), honouring lifecycle hooks, and optionally serves the
webhook that freezes hooks once deletion starts. Run one replica.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

from ferryman.app import flag_types
from ferryman.machines import lifecycle
from ferryman.observability import logs


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--kubeconfig",
        metavar="PATH",
        help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then the in-cluster "
        "service account)",
    )
    p.add_argument(
        "--namespace", default="*", metavar="NAMESPACE", help="Machines' namespace (* for all)"
    )
    p.add_argument(
        "--drain-timeout",
        type=flag_types.seconds,
        default=lifecycle.DRAIN_TIMEOUT,
        metavar="SECONDS",
        help="bound on one drain round; pods still there then make the round fail "
        "(Drained False, DrainError) and it is tried again later",
    )
    p.add_argument(
        "--drain-backoff",
        type=flag_types.seconds,
        default=lifecycle.DRAIN_BACKOFF,
        metavar="SECONDS",
        help="pause after a failed drain round, doubling per failure up to 1000 s",
    )
    p.add_argument(
        "--eviction-retry-interval",
        type=flag_types.seconds,
        default=lifecycle.EVICTION_RETRY,
        metavar="SECONDS",
        help="pause before evicting again a pod a PodDisruptionBudget protected (HTTP 429)",
    )
    p.add_argument(
        "--instances-dir",
        type=Path,
        metavar="DIR",
        help="the local provider's instances: a file <namespace>.<name> per Machine, "
        "removed to delete the instance (default: none, no instances to delete)",
    )
    p.add_argument(
        "--webhook-port",
        type=flag_types.port,
        default=0,
        metavar="PORT",
        help="serve the Machine validating webhook over HTTPS on this port; 0 disables",
    )
    p.add_argument(
        "--webhook-cert-file",
        type=Path,
        metavar="PATH",
        help="the webhook's certificate (default: none)",
    )
    p.add_argument(
        "--webhook-key-file",
        type=Path,
        metavar="PATH",
        help="the webhook's private key (default: none)",
    )
    flag_types.add_log_flags(p)


@dataclass(frozen=True)
class Options:
    """The subcommand's settings, as its flags give them."""

    kubeconfig: str | None = None
    namespace: str = "*"
    drain_timeout: float = lifecycle.DRAIN_TIMEOUT
    drain_backoff: float = lifecycle.DRAIN_BACKOFF
    eviction_retry: float = lifecycle.EVICTION_RETRY
    instances_dir: Path | None = None
    webhook_port: int = 0
    webhook_cert_file: Path | None = None
    webhook_key_file: Path | None = None


def main(args: argparse.Namespace) -> int:
    logs.setup(args.log_format, args.log_level)
    options = Options(
        kubeconfig=args.kubeconfig,
        namespace=args.namespace,
        drain_timeout=args.drain_timeout,
        drain_backoff=args.drain_backoff,
        eviction_retry=args.eviction_retry_interval,
        instances_dir=args.instances_dir,
        webhook_port=args.webhook_port,
        webhook_cert_file=args.webhook_cert_file,
        webhook_key_file=args.webhook_key_file,
    )
    if options.webhook_port and not (options.webhook_cert_file and options.webhook_key_file):
        print(
            "ferryman machine-controller: --webhook-port needs --webhook-cert-file and "
            "--webhook-key-file",
            file=sys.stderr,
        )
        return 2
    # Here, not above: `ferryman run` builds this subcommand's parser too, and
    # lightkube is Kubernetes mode's alone (tests/unit/test_footprint.py).
    from ferryman.kube.client import KubeconfigError

    try:
        asyncio.run(_run(options))
    except KubeconfigError as e:
        print(f"ferryman machine-controller: {e}", file=sys.stderr)
        return 2
    return 0


async def _run(options: Options) -> None:
    # Here, not above: `ferryman run` builds this subcommand's parser too, and
    # must not carry the controller's modules.
    from ferryman.kube.client import make_client
    from ferryman.machines import reconciler, webhook
    from ferryman.machines.events import EventWriter
    from ferryman.machines.provider import LocalProvider

    client = make_client(options.kubeconfig)
    instance = os.environ.get("POD_NAME") or socket.gethostname()
    controller = reconciler.MachineReconciler(
        client,
        LocalProvider(options.instances_dir),
        EventWriter(client, instance),
        namespace=options.namespace,
        drain_timeout=options.drain_timeout,
        drain_backoff=options.drain_backoff,
        eviction_retry=options.eviction_retry,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    with contextlib.suppress(asyncio.CancelledError):
        async with asyncio.TaskGroup() as tg:
            tasks = [tg.create_task(controller.run(), name="machine controller")]
            if options.webhook_port and options.webhook_cert_file and options.webhook_key_file:
                tasks.append(
                    tg.create_task(
                        webhook.serve(
                            options.webhook_port,
                            options.webhook_cert_file,
                            options.webhook_key_file,
                        ),
                        name="machine webhook",
                    )
                )
            await stop.wait()
            for t in tasks:
                t.cancel()
    await client.close()
