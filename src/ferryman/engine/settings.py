"""Settings shared by the composition root and the controller."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

# ferryman's name as a controller: IngressClasses' spec.controller, Events'
# reportingController, the Machine lifecycle hooks' owner.
CONTROLLER_NAME = "ferryman.io/ingress-controller"


class SettingsError(ValueError):
    """A setting ferryman cannot run with (said to the user, exit code 2)."""


@dataclass(frozen=True)
class Settings:
    state_dir: Path
    manifests: Path | None = None
    kubeconfig: str | None = None
    http_port: int = 80
    https_port: int = 443
    ready_port: int = 8081
    metrics_port: int = 9113
    ingress_class: str = "ferryman"
    nginx_binary: str = "nginx"
    nginx_reload_timeout: float = 60.0
    nginx_modules_dir: Path = Path("/usr/lib/nginx/modules")
    # The Lua libraries of --nginx-binary's own build (lua-resty-core), looked
    # up before the system's (app/build_tree.py); None: the system's.
    nginx_lua_dir: Path | None = None
    worker_processes: str = "auto"
    worker_shutdown_timeout: str = ""  # NGINX time; "" leaves old workers unbounded
    # Seconds between SIGTERM (readiness turns 503) and NGINX's graceful quit
    # (--shutdown-grace-period); 0 quits at once.
    shutdown_grace_period: float = 0.0
    watch_namespaces: tuple[str, ...] = ()
    # --readiness-gates: watch Pods of opted-in namespaces and route to pods held
    # back only by ferryman's readiness gate (resources/readiness_gate.py).
    readiness_gates: bool = False
    # Kubernetes mode: status, leader election.
    report_ingress_status: bool = False
    external_service: str | None = None  # namespace/name of ferryman's own Service
    ingress_addresses: tuple[str, ...] = ()
    leader_election: bool = True
    leader_lock_name: str = "ferryman-leader-election"
    leader_lock_namespace: str = "default"
    lease_duration: float = 30.0
    renew_deadline: float = 15.0
    retry_period: float = 7.5
    # Readiness gates: seconds after a pod's creation to open its gate anyway
    # (--readiness-gate-timeout); 0 waits for every live replica however long.
    readiness_gate_timeout: float = 0.0
    # NIC's --nginx-status/--health-status family.
    # NIC serves stub_status on 8080 by default; ferryman only when asked, so
    # instances sharing a machine (and --http-port 8080) cannot collide.
    nginx_status_port: int = 0
    nginx_status_allow: tuple[str, ...] = ("127.0.0.1", "::1")
    health_uri: str = ""
    latency_metrics: bool = False
    # Request hygiene (docs/operations.md, "Requests and headers").
    compute_full_forwarded_for: bool = True
    strict_request_paths: bool = False
    # NIC's --global-configuration (namespace, name): the TCP/UDP listeners
    # TransportServers use; None: none.
    global_configuration: tuple[str, str] | None = None
    # NIC's --default-server-tls-secret and --wildcard-tls-secret (namespace, name):
    # the default server's certificate, and that of TLS hosts naming no Secret.
    default_server_tls_secret: tuple[str, str] | None = None
    wildcard_tls_secret: tuple[str, str] | None = None
    # NIC's --enable-tls-passthrough: TransportServers on the built-in
    # tls-passthrough listener, sharing the HTTPS port by SNI.
    tls_passthrough: bool = False
    # --disable-ipv6 (NIC's -disable-ipv6): public ports listen on IPv4 only.
    # Otherwise on IPv6 too ([::], configs/listen.py); ``run`` sets it when the
    # machine has no IPv6 to listen on (dataplane/ipv6.py).
    disable_ipv6: bool = False
    # NGINX shared memory for hosts, routes, certificates and endpoint sets
    # (--records-memory-size): 10,000 hosts with TLS and 20,000 endpoints take
    # about 40 MB.
    shared_dict_size: str = "128m"
    # The largest record pushed (--max-record-bytes): above any sane Ingress's
    # host record and an endpoint set of 10,000 IPv6 endpoints (~460 kB), yet
    # 256 of them are needed to fill the default 128m.
    max_record_bytes: int = 512 * 1024
    # --allowed-host-suffixes: (namespace, suffix) pairs; empty: no host policy.
    allowed_host_suffixes: tuple[tuple[str, str], ...] = ()
    # Readiness gates' injection webhook (Kubernetes mode): its HTTPS port (0: off),
    # the Secret holding its certificate, the names a made certificate is for, and
    # the MutatingWebhookConfiguration whose caBundle ferryman keeps (None: not kept).
    readiness_gate_webhook_port: int = 0
    readiness_gate_webhook_cert_secret: tuple[str, str] | None = None
    readiness_gate_webhook_cert_hosts: tuple[str, ...] = ()
    readiness_gate_webhook_configuration: str | None = None
    # Machine deletion lifecycle hooks (--machine-lifecycle-hooks): "openshift"
    # (machine.openshift.io Machines' spec.lifecycleHooks), "cluster-api" (the
    # cluster.x-k8s.io Machines' annotations) or "off"; and how long a drain may
    # hold a Machine's deletion at each hook (--machine-drain-timeout).
    machine_lifecycle_hooks: str = "off"
    machine_drain_timeout: float = 300.0
    # Requests in flight hold a drain at most this long (--drain-in-flight-timeout; 0: no cap).
    drain_in_flight_timeout: float = 0.0
    # The Node this replica runs on (NODE_NAME, from the downward API): its
    # readiness fails while that Node's Machine is being deleted.
    node_name: str = ""
    # --nginx-configmaps: NIC's nginx-config ConfigMap (namespace, name) whose keys
    # tune nginx.conf and give every route its defaults (configs/configmap.py).
    nginx_configmap: tuple[str, str] | None = None
    # --ingress-nginx-configmap: ingress-nginx's ConfigMap, its keys read as NIC's
    # (configs/ingress_nginx_configmap.py) under nginx_configmap's.
    ingress_nginx_configmap: tuple[str, str] | None = None
    # --enable-cert-manager: VirtualServers' tls.cert-manager become cert-manager
    # Certificates (certificates/), as NIC's -enable-cert-manager.
    enable_cert_manager: bool = False
    # Gateway API (--enable-gateway-api): GatewayClasses whose controllerName is
    # gateway_controller_name are served; each Gateway takes an address of
    # gateway_addresses (--gateway-addresses: its listeners listen there, and
    # its status shows it), or with none listens on every address.
    gateway_api: bool = False
    gateway_controller_name: str = "ferryman.io/gateway-controller"
    gateway_addresses: tuple[str, ...] = ()
    # Changes arriving within this window after the queue empties join one reload.
    batch_window: float = 0.05
    # ...but a steady trickle of changes never holds a reload back longer than this.
    batch_max_delay: float = 1.0
