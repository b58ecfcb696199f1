"""``ferryman run``'s flags for working with other replicas and the cluster:
leader election, readiness gates and their webhook, Machine deletion hooks.
Each concern is an argument group, so ``--help`` shows them together."""

from __future__ import annotations

import argparse
import os

from ferryman.app import flag_types
from ferryman.resources import validation


def add(r: argparse.ArgumentParser) -> None:
    _leader_election(r.add_argument_group("leader election (Kubernetes mode)"))
    _readiness_gates(r.add_argument_group("pod readiness gates (Kubernetes mode)"))
    _machine_hooks(r.add_argument_group("Machine deletion lifecycle hooks"))


def _leader_election(g: argparse._ArgumentGroup) -> None:
    g.add_argument(
        "--enable-leader-election",
        type=flag_types.boolean,
        default=True,
        metavar="BOOL",
        help="only the Lease holder writes status and Events (default: true)",
    )
    g.add_argument(
        "--leader-election-lock-name",
        default="ferryman-leader-election",
        metavar="NAME",
        help="name of the Lease",
    )
    g.add_argument(
        "--leader-election-namespace",
        default=os.environ.get("POD_NAMESPACE", "default"),
        metavar="NAMESPACE",
        help="namespace of the Lease (default: $POD_NAMESPACE, else default)",
    )
    # Lease timings (NIC's defaults); tests shorten them.
    g.add_argument(
        "--leader-election-lease-duration",
        type=flag_types.seconds,
        default=30.0,
        metavar="SECONDS",
        help="seconds a Lease lasts without renewal",
    )
    g.add_argument(
        "--leader-election-renew-deadline",
        type=flag_types.seconds,
        default=15.0,
        metavar="SECONDS",
        help="seconds the leader keeps leading while its renewals fail",
    )
    g.add_argument(
        "--leader-election-retry-period",
        type=flag_types.seconds,
        default=7.5,
        metavar="SECONDS",
        help="seconds between tries to take or renew the Lease",
    )


def _readiness_gates(g: argparse._ArgumentGroup) -> None:
    g.add_argument(
        "--readiness-gates",
        action="store_true",
        help="Kubernetes mode: watch Pods in namespaces labelled "
        "ferryman.io/pod-readiness-gate-inject=enabled and route to pods held back only "
        "by ferryman's readiness gate (docs/design.md, Readiness gates); implied by "
        "--readiness-gate-webhook-port",
    )
    g.add_argument(
        "--readiness-gate-timeout",
        type=flag_types.non_negative_seconds,
        default=0.0,
        metavar="SECONDS",
        help="seconds after a pod's creation to open its readiness gate even though not "
        "every replica has applied it, with a Warning Event (default: 0, never)",
    )
    g.add_argument(
        "--readiness-gate-webhook-port",
        type=flag_types.port,
        default=0,
        metavar="PORT",
        help="Kubernetes mode: serve the webhook that adds readiness gates to pods of "
        "opted-in namespaces, over HTTPS on this port (ignored with --manifests; "
        "default: 0, off)",
    )
    g.add_argument(
        "--readiness-gate-webhook-cert-secret",
        type=flag_types.namespaced_name,
        metavar="NAMESPACE/NAME",
        help="the webhook's certificate (tls.crt, tls.key, ca.crt); when absent, "
        "ferryman makes one and creates this Secret (required with the port; default: none)",
    )
    g.add_argument(
        "--readiness-gate-webhook-cert-hosts",
        type=flag_types.hosts,
        default=(),
        metavar="NAMES",
        help="comma-separated DNS names or IP addresses a certificate ferryman makes "
        "is for: the webhook Service's NAME.NAMESPACE.svc (default: none)",
    )
    g.add_argument(
        "--readiness-gate-webhook-configuration",
        type=flag_types.checked(validation.dns1123_subdomain),
        metavar="NAME",
        help="the MutatingWebhookConfiguration whose webhooks' caBundle ferryman keeps "
        "on the certificate's CA (default: none, kept by someone else)",
    )


def _machine_hooks(g: argparse._ArgumentGroup) -> None:
    g.add_argument(
        "--machine-lifecycle-hooks",
        choices=("openshift", "cluster-api", "off"),
        default="off",
        help="hold Machine deletions with a pre-drain hook until traffic has left the "
        "Machine's Node: openshift (machine.openshift.io spec.lifecycleHooks), "
        "cluster-api (cluster.x-k8s.io annotations) or off (default)",
    )
    g.add_argument(
        "--machine-drain-timeout",
        type=flag_types.non_negative_seconds,
        default=300.0,
        metavar="SECONDS",
        help="the longest a drain holds a Machine's deletion at each hook before "
        "releasing it with a Warning Event (default: 300)",
    )
    g.add_argument(
        "--drain-in-flight-timeout",
        type=flag_types.non_negative_seconds,
        default=0.0,
        metavar="SECONDS",
        help="once a leaving Node is out of rotation on every replica, the longest "
        "requests still in flight through it hold the drain, counted from the "
        "deletion (0, the default: until --machine-drain-timeout)",
    )
