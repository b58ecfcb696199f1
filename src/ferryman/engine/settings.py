"""Settings shared by the composition root and the controller, grouped by concern
(kopf's ``OperatorSettings``): a module reads the one group it cares about, and a
test builds only the group it changes."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

# ferryman's name as a controller: IngressClasses' spec.controller, Events'
# reportingController, the Machine lifecycle hooks' owner.
CONTROLLER_NAME = "ferryman.io/ingress-controller"


class SettingsError(ValueError):
    """A setting ferryman cannot run with (said to the user, exit code 2)."""


@dataclass(frozen=True)
class ListenSettings:
    """The ports ferryman listens on: NGINX's public ones and its own probes and
    metrics, and whether the public ones take IPv6 too."""

    http_port: int = 80
    https_port: int = 443
    ready_port: int = 8081
    metrics_port: int = 9113
    # --disable-ipv6 (NIC's -disable-ipv6): public ports listen on IPv4 only.
    # Otherwise on IPv6 too ([::], configs/listen.py); ``run`` sets it when the
    # machine has no IPv6 to listen on (dataplane/ipv6.py).
    disable_ipv6: bool = False


@dataclass(frozen=True)
class NginxSettings:
    """The data plane: its binary and build, what nginx.conf says globally, the
    shared memory records are pushed into, and the ConfigMaps tuning it."""

    binary: str = "nginx"
    reload_timeout: float = 60.0
    modules_dir: Path = Path("/usr/lib/nginx/modules")
    # The Lua libraries of --nginx-binary's own build (lua-resty-core), looked
    # up before the system's (app/build_tree.py); None: the system's.
    lua_dir: Path | None = None
    worker_processes: str = "auto"
    worker_shutdown_timeout: str = ""  # NGINX time; "" leaves old workers unbounded
    # NGINX shared memory for hosts, routes, certificates and endpoint sets
    # (--records-memory-size): 10,000 hosts with TLS and 20,000 endpoints take
    # about 40 MB.
    shared_dict_size: str = "128m"
    # The largest record pushed (--max-record-bytes): above any sane Ingress's
    # host record and an endpoint set of 10,000 IPv6 endpoints (~460 kB), yet
    # 256 of them are needed to fill the default 128m.
    max_record_bytes: int = 512 * 1024
    # NIC's --nginx-status/--health-status family.
    # NIC serves stub_status on 8080 by default; ferryman only when asked, so
    # instances sharing a machine (and --http-port 8080) cannot collide.
    status_port: int = 0
    status_allow: tuple[str, ...] = ("127.0.0.1", "::1")
    health_uri: str = ""
    latency_metrics: bool = False
    # Request hygiene (docs/operations.md, "Requests and headers").
    compute_full_forwarded_for: bool = True
    strict_request_paths: bool = False
    # --nginx-configmaps: NIC's nginx-config ConfigMap (namespace, name) whose keys
    # tune nginx.conf and give every route its defaults (configs/configmap.py).
    configmap: tuple[str, str] | None = None
    # --ingress-nginx-configmap: ingress-nginx's ConfigMap, its keys read as NIC's
    # (configs/ingress_nginx_configmap.py) under ``configmap``'s.
    ingress_nginx_configmap: tuple[str, str] | None = None


@dataclass(frozen=True)
class KubernetesSettings:
    """Kubernetes mode's API access: which namespaces are watched, and what
    ferryman writes back (status addresses, cert-manager Certificates)."""

    kubeconfig: str | None = None
    watch_namespaces: tuple[str, ...] = ()
    report_status: bool = False
    external_service: str | None = None  # namespace/name of ferryman's own Service
    ingress_addresses: tuple[str, ...] = ()
    # --enable-cert-manager: VirtualServers' tls.cert-manager become cert-manager
    # Certificates (certificates/), as NIC's -enable-cert-manager.
    cert_manager: bool = False


@dataclass(frozen=True)
class LeaderElectionSettings:
    """Which replica writes status (Kubernetes mode): its Lease, whose namespace
    also holds the per-replica Leases of gates and drains, and the Lease timings."""

    enabled: bool = True
    lock_name: str = "ferryman-leader-election"
    lock_namespace: str = "default"
    lease_duration: float = 30.0
    renew_deadline: float = 15.0
    retry_period: float = 7.5


@dataclass(frozen=True)
class ReadinessGateSettings:
    """Readiness gates (--readiness-gates): watch Pods of opted-in namespaces and
    route to pods held back only by ferryman's gate (resources/readiness_gate.py);
    and the webhook injecting that gate into new pods."""

    enabled: bool = False
    # Seconds after a pod's creation to open its gate anyway
    # (--readiness-gate-timeout); 0 waits for every live replica however long.
    timeout: float = 0.0
    # The injection webhook (Kubernetes mode): its HTTPS port (0: off), the Secret
    # holding its certificate, the names a made certificate is for, and the
    # MutatingWebhookConfiguration whose caBundle ferryman keeps (None: not kept).
    webhook_port: int = 0
    webhook_cert_secret: tuple[str, str] | None = None
    webhook_cert_hosts: tuple[str, ...] = ()
    webhook_configuration: str | None = None


@dataclass(frozen=True)
class DrainSettings:
    """How a replica leaves without dropping requests: SIGTERM's grace period, and
    the Machine deletion lifecycle hooks holding a Node's removal until drained."""

    # Seconds between SIGTERM (readiness turns 503) and NGINX's graceful quit
    # (--shutdown-grace-period); 0 quits at once.
    grace_period: float = 0.0
    # --machine-lifecycle-hooks: "openshift" (machine.openshift.io Machines'
    # spec.lifecycleHooks), "cluster-api" (the cluster.x-k8s.io Machines'
    # annotations) or "off"; and how long a drain may hold a Machine's deletion
    # at each hook (--machine-drain-timeout).
    machine_hooks: str = "off"
    machine_timeout: float = 300.0
    # Requests in flight hold a drain at most this long (--drain-in-flight-timeout; 0: no cap).
    in_flight_timeout: float = 0.0
    # The Node this replica runs on (NODE_NAME, from the downward API): its
    # readiness fails while that Node's Machine is being deleted.
    node_name: str = ""


@dataclass(frozen=True)
class TLSSettings:
    """The certificates served where a host names none (NIC's
    --default-server-tls-secret and --wildcard-tls-secret, namespace and name)."""

    default_server_secret: tuple[str, str] | None = None
    wildcard_secret: tuple[str, str] | None = None


@dataclass(frozen=True)
class TransportSettings:
    """TransportServers' listeners: NIC's GlobalConfiguration and TLS passthrough."""

    # NIC's --global-configuration (namespace, name): the TCP/UDP listeners
    # TransportServers use; None: none.
    global_configuration: tuple[str, str] | None = None
    # NIC's --enable-tls-passthrough: TransportServers on the built-in
    # tls-passthrough listener, sharing the HTTPS port by SNI.
    tls_passthrough: bool = False


@dataclass(frozen=True)
class GatewaySettings:
    """Gateway API (--enable-gateway-api): GatewayClasses whose controllerName is
    ``controller_name`` are served; each Gateway takes an address of ``addresses``
    (--gateway-addresses: its listeners listen there, and its status shows it), or
    with none listens on every address."""

    enabled: bool = False
    controller_name: str = "ferryman.io/gateway-controller"
    addresses: tuple[str, ...] = ()


@dataclass(frozen=True)
class BatchSettings:
    """How changes are gathered into one reload."""

    # Changes arriving within this window after the queue empties join one reload.
    window: float = 0.05
    # ...but a steady trickle of changes never holds a reload back longer than this.
    max_delay: float = 1.0


@dataclass(frozen=True)
class Settings:
    """Everything ``ferryman run`` and ``render`` are told: what is global sits
    here, the rest in one group per concern."""

    state_dir: Path
    manifests: Path | None = None
    ingress_class: str = "ferryman"
    # --allowed-host-suffixes: (namespace, suffix) pairs; empty: no host policy.
    allowed_host_suffixes: tuple[tuple[str, str], ...] = ()
    listen: ListenSettings = field(default_factory=ListenSettings)
    nginx: NginxSettings = field(default_factory=NginxSettings)
    kubernetes: KubernetesSettings = field(default_factory=KubernetesSettings)
    leader_election: LeaderElectionSettings = field(default_factory=LeaderElectionSettings)
    gates: ReadinessGateSettings = field(default_factory=ReadinessGateSettings)
    drain: DrainSettings = field(default_factory=DrainSettings)
    tls: TLSSettings = field(default_factory=TLSSettings)
    transport: TransportSettings = field(default_factory=TransportSettings)
    gateway: GatewaySettings = field(default_factory=GatewaySettings)
    batch: BatchSettings = field(default_factory=BatchSettings)
