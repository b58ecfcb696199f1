"""A test kubelet: one Node whose pods are real processes with addresses of their own.

With tools/testapiserver's ``--controllers``, Deployments, ReplicaSets and
EndpointSlices are worked out by Kubernetes' own controllers; this kubelet
is the missing node agent. It

* registers a Node (Ready, InternalIP) backed by a network namespace joined
  to this machine by a veth pair, on a /24 of its own;
* binds every unscheduled pod (default scheduler) to that Node, unless
  ``bind=False`` (a second Node that runs only pods created on it);
* gives each of its pods an address of its own in the namespace and starts
  one process for it (by default testkit/podproc.py, an echo
  backend answering with the pod's name on the first container's ports);
* writes pod status the way kubelet does: phase, podIP(s), hostIP(s),
  PodScheduled/Initialized/ContainersReady/Ready, containerStatuses, where
  Ready = ContainersReady AND every spec.readinessGates condition is True,
  re-evaluated whenever someone changes a gate condition;
* on deletion (deletionTimestamp) sleeps for a ``lifecycle.preStop.sleep``,
  sends SIGTERM, waits up to the rest of the pod's grace period, kills, then
  deletes the pod with gracePeriodSeconds 0.

* runs the first container's ``readinessProbe`` (httpGet or tcpSocket, from
  this machine, as kubelet probes from the node): initialDelaySeconds, then
  every periodSeconds, ready after successThreshold successes and unready
  after failureThreshold failures, also while the pod terminates. Without a
  probe the container is ready once the process says it serves.

With ``pod_netns=True`` each pod gets a network namespace of its own, joined to
the node's by a veth on a bridge there (servers that bind every address, such as
Gateway API's echo-basic, cannot share one), and ``secret`` and ``configMap``
volumes are written to a directory per pod, with env values under a volume's
``mountPath`` pointed there. As a kubelet does, a pod whose Secret or
ConfigMap does not exist yet waits (no process, no status) and starts once it
does; that is not an error.

* keeps each pod's stdout and stderr (CRI's log format) and serves them on
  an HTTPS endpoint in the node's namespace, the Node's
  ``daemonEndpoints.kubeletEndpoint``, so the API server's ``pods/log``
  works (testkit/kubelet_logs.py; the API server needs
  ``--kubelet-preferred-address-types=InternalIP``: the Node's Hostname
  resolves nowhere).

Not done: container restarts (a process that exits leaves the pod running but
not ready), liveness and startup probes, exec probes and preStop hooks, other
volumes; pods are never evicted.

Needs root and iproute2. Not thread-safe to drive from several threads; a
test uses ``start()``/``stop()`` (or the ``kubelet`` fixture).
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
from lightkube import Client
from lightkube.config.kubeconfig import KubeConfig
from lightkube.core.decoders import decode_object, decode_watch_event
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import ConfigMap, Node, Pod, Secret
from lightkube.types import OnErrorAction, OnErrorResult, PatchType

from testkit.kubelet_logs import ContainerLog, LogServer
from testkit.netns import free_subnet, reap_stale

ROOT = Path(__file__).resolve().parents[1]

# (pod as a dict, its IP, its ports) -> argv; the process must print one line
# once it serves (its readiness), and is run inside the node's namespace.
Command = Callable[[dict[str, Any], str, list[int]], list[str]]


def echo_command(pod: dict[str, Any], ip: str, ports: list[int]) -> list[str]:
    name = pod["metadata"]["name"]
    return [sys.executable, "-m", "testkit.podproc", name, ip, *map(str, ports)]


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class _Run:
    """One pod's process; ``ready``/``exited`` are set by its watcher thread."""

    uid: str
    ip: str
    proc: subprocess.Popen[str]
    started_at: str
    log: ContainerLog
    netns: str | None = None  # its own network namespace (pod_netns)
    ready: bool = False
    exited: bool = False
    terminating: bool = False
    done: threading.Event = field(default_factory=threading.Event)


_warmed = threading.Lock()


def _warm_decoders() -> None:
    """lightkube's decoders (msgspec) build a type's decoder on first use; two
    threads doing that at once crashed the interpreter (SIGSEGV in msgspec's
    _core: two kubelets' watches decoding their first Pod, seen by
    bench/machine_drain.py), so the first kubelet builds them before any thread."""
    with _warmed:
        for res in (Pod, Node):
            decode_object(b'{"apiVersion": "v1", "metadata": {"name": "warm"}}', res)
        decode_watch_event(b'{"type": "ADDED", "object": {}}')


class Kubelet:
    def __init__(
        self,
        kubeconfig: str,
        workdir: Path,
        node: str = "node-1",
        index: int = 0,
        command: Command = echo_command,
        bind: bool = True,
        pod_netns: bool = False,
    ) -> None:
        n = os.getpid() % 250 + 1
        self.node = node
        self.workdir = workdir
        self.command = command
        # False: run only pods created with spec.nodeName here (a second Node
        # in a test must not take pods meant for the first).
        self.bind = bind
        self.pod_netns = pod_netns
        self._pod_seq = 0
        self.netns = f"fm-node-{os.getpid()}-{index}"
        self.bridge = f"fmb{os.getpid()}x{index}"[:15]
        self.host_if = f"fnh{os.getpid()}x{index}"[:15]
        self.peer_if = f"fnp{os.getpid()}x{index}"[:15]
        prefix = f"10.{232 + index}.{free_subnet(f'10.{232 + index}', n)}"
        self.host_address = f"{prefix}.1"  # this machine's end of the link
        self.node_address = f"{prefix}.254"  # the Node's InternalIP
        self._free = [f"{prefix}.{i}" for i in range(2, 254)]
        config = KubeConfig.from_file(kubeconfig)
        self._client = Client(config=config, field_manager="test-kubelet")
        self._watch_client = Client(config=config, field_manager="test-kubelet")
        # lightkube turns off the read timeout of watches, and closing the
        # client does not end a blocked read; with a 1 s one an idle watch
        # ends each second, and on_error below retries it from the last
        # resourceVersion, or stops it once stop() was called.
        self._watch_client._client._watch_timeout.read = 1.0
        self._pods: dict[str, dict[str, Any]] = {}  # namespace/name -> latest pod
        self._runs: dict[str, _Run] = {}
        self._logs: dict[str, ContainerLog] = {}  # namespace/name -> its log (pods/log)
        self._log_server: LogServer | None = None
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self.errors: list[str] = []  # reconcile failures, for a test to assert on

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        _warm_decoders()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._create_network()
        self._log_server = LogServer(self.netns, self.node_address, self.workdir, self._logs.get)
        self._log_server.start()
        self._register_node()
        for target in (self._watch, self._work):
            t = threading.Thread(target=target, daemon=True, name=f"kubelet-{target.__name__}")
            t.start()
            self._threads.append(t)

    def stop(self) -> None:
        self._stopping.set()
        self._queue.put(None)
        for t in self._threads:
            t.join(10)
        self._watch_client.close()
        for run in self._runs.values():
            run.proc.kill()
            run.proc.wait()
            if run.netns:
                subprocess.run(["ip", "netns", "del", run.netns], capture_output=True)
        self._runs.clear()
        if self._log_server is not None:
            self._log_server.stop()
        with contextlib.suppress(ApiError):
            self._client.delete(Node, self.node)
        subprocess.run(["ip", "link", "del", self.host_if], capture_output=True)
        subprocess.run(["ip", "netns", "del", self.netns], capture_output=True)
        self._client.close()

    def _create_network(self) -> None:
        reap_stale()
        _ip("netns", "add", self.netns)
        _ip("link", "add", self.host_if, "type", "veth", "peer", "name", self.peer_if)
        _ip("link", "set", self.peer_if, "netns", self.netns)
        _ip("addr", "add", f"{self.host_address}/24", "dev", self.host_if)
        _ip("link", "set", self.host_if, "up")
        inside = ("netns", "exec", self.netns, "ip")
        _ip(*inside, "link", "set", self.peer_if, "up")
        _ip(*inside, "link", "set", "lo", "up")
        if self.pod_netns:
            # One L2 segment: this machine's link and every pod's veth on a bridge.
            _ip(*inside, "link", "add", self.bridge, "type", "bridge")
            _ip(*inside, "link", "set", self.peer_if, "master", self.bridge)
            _ip(*inside, "link", "set", self.bridge, "up")
            _ip(*inside, "addr", "add", f"{self.node_address}/24", "dev", self.bridge)
        else:
            _ip(*inside, "addr", "add", f"{self.node_address}/24", "dev", self.peer_if)

    def _create_pod_network(self, ip: str) -> str:
        """A network namespace with ``ip`` on a veth whose other end is on the bridge."""
        self._pod_seq += 1
        ns = f"fm-pod-{os.getpid()}-{self._pod_seq}"
        outer = f"fmv{os.getpid() % 100000}x{self._pod_seq}"[:15]
        _ip("netns", "add", ns)
        _ip("-n", self.netns, "link", "add", outer, "type", "veth", "peer", "name", "eth0",
            "netns", ns)  # fmt: skip
        _ip("-n", self.netns, "link", "set", outer, "master", self.bridge)
        _ip("-n", self.netns, "link", "set", outer, "up")
        _ip("-n", ns, "addr", "add", f"{ip}/24", "dev", "eth0")
        _ip("-n", ns, "link", "set", "eth0", "up")
        _ip("-n", ns, "link", "set", "lo", "up")
        _ip("-n", ns, "route", "add", "default", "via", self.node_address)
        return ns

    def _register_node(self) -> None:
        node = Node.from_dict(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": self.node, "labels": {"kubernetes.io/hostname": self.node}},
            }
        )
        try:
            self._client.create(node)
        except ApiError as e:
            if e.status.code != 409:
                raise
        now = _now()
        self._client.patch(
            Node.Status,
            self.node,
            {
                "status": {
                    "conditions": [
                        {
                            "type": "Ready",
                            "status": "True",
                            "reason": "KubeletReady",
                            "message": "test kubelet is posting ready status",
                            "lastHeartbeatTime": now,
                            "lastTransitionTime": now,
                        }
                    ],
                    "addresses": [
                        {"type": "InternalIP", "address": self.node_address},
                        {"type": "Hostname", "address": self.node},
                    ],
                    "capacity": {"cpu": "8", "memory": "16Gi", "pods": "250"},
                    # Where the API server finds this kubelet (pods/log), at the InternalIP.
                    "daemonEndpoints": {"kubeletEndpoint": {"Port": self._log_server_port()}},
                    "allocatable": {"cpu": "8", "memory": "16Gi", "pods": "250"},
                }
            },
            patch_type=PatchType.MERGE,
        )

    def _log_server_port(self) -> int:
        assert self._log_server is not None
        return self._log_server.port

    # ------------------------------------------------------------------ watch + queue

    def _watch(self) -> None:
        def on_error(e: Exception, count: int) -> OnErrorResult:
            if self._stopping.is_set():
                return OnErrorResult(OnErrorAction.STOP)
            return OnErrorResult(OnErrorAction.RETRY)

        try:
            self._watch_pods(on_error)
        except Exception:
            if not self._stopping.is_set():
                raise

    def _watch_pods(self, on_error: Any) -> None:
        for kind, pod in self._watch_client.watch(Pod, namespace="*", on_error=on_error):
            if self._stopping.is_set():
                return
            d = pod.to_dict()
            key = f"{d['metadata']['namespace']}/{d['metadata']['name']}"
            if kind == "DELETED":
                self._pods.pop(key, None)
            else:
                self._pods[key] = d
            self._queue.put(key)

    def _work(self) -> None:
        while (key := self._queue.get()) is not None:
            if self._stopping.is_set():
                return
            try:
                self._reconcile(key)
            except Exception as e:  # keep the node alive; the test sees .errors
                if not self._stopping.is_set():
                    self.errors.append(f"{key}: {e!r}")
                    threading.Timer(0.5, self._queue.put, (key,)).start()

    # ------------------------------------------------------------------ reconcile

    def _reconcile(self, key: str) -> None:
        pod = self._pods.get(key)
        run = self._runs.get(key)
        if run is not None and (pod is None or pod["metadata"]["uid"] != run.uid):
            self._discard(key, run)  # deleted from the API (or replaced) behind our back
            run = None
        if pod is None:
            return
        md, spec = pod["metadata"], pod["spec"]
        namespace, name = md["namespace"], md["name"]
        if not spec.get("nodeName"):
            default_scheduler = spec.get("schedulerName") in (None, "default-scheduler")
            if self.bind and default_scheduler and not md.get("deletionTimestamp"):
                self._bind(namespace, name)
            return
        if spec["nodeName"] != self.node:
            return
        if md.get("deletionTimestamp"):
            if run is not None and not run.exited:
                if not run.terminating:
                    run.terminating = True
                    grace = md.get("deletionGracePeriodSeconds")
                    pre_stop = max(_pre_stop_sleep(c) for c in spec["containers"])
                    threading.Thread(
                        target=self._terminate,
                        args=(run, 30 if grace is None else grace, pre_stop),
                        daemon=True,
                    ).start()
                return
            with contextlib.suppress(ApiError):
                self._client.delete(Pod, name, namespace=namespace, grace_period=0)
            if run is not None:
                self._discard(key, run)
            return
        if run is None:
            if self.pod_netns and not self._volumes_exist(pod):
                threading.Timer(0.5, self._queue.put, (key,)).start()
                return
            run = self._start_pod(key, pod)
        self._write_status(pod, run)

    def _volumes_exist(self, pod: dict[str, Any]) -> bool:
        """Every Secret and ConfigMap the pod mounts exists (a kubelet leaves
        the pod ContainerCreating until then)."""
        namespace = pod["metadata"]["namespace"]
        for volume in pod["spec"].get("volumes") or []:
            kind, name = (
                (Secret, volume["secret"]["secretName"]) if "secret" in volume
                else (ConfigMap, volume["configMap"]["name"]) if "configMap" in volume
                else (None, "")
            )  # fmt: skip
            if kind is None:
                continue
            try:
                self._client.get(kind, name, namespace=namespace)
            except ApiError as e:
                if e.status.code == 404:
                    return False
                raise
        return True

    def _bind(self, namespace: str, name: str) -> None:
        binding = Pod.Binding.from_dict(
            {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": name, "namespace": namespace},
                "target": {"apiVersion": "v1", "kind": "Node", "name": self.node},
            }
        )
        try:
            self._client.create(binding, name=name, namespace=namespace)
        except msgspec.ValidationError:
            pass  # bound: the answer is a Status, which lightkube fails to decode as a Binding
        except ApiError as e:
            if e.status.code not in (404, 409):  # gone, or bound meanwhile
                raise

    def _start_pod(self, key: str, pod: dict[str, Any]) -> _Run:
        ip = self._free.pop(0)
        if self.pod_netns:
            netns = self._create_pod_network(ip)
        else:
            netns = self.netns
            _ip("netns", "exec", self.netns, "ip", "addr", "add", f"{ip}/24", "dev", self.peer_if)
        containers = pod["spec"]["containers"]
        ports = [
            p["containerPort"]
            for p in containers[0].get("ports") or []
            if p.get("protocol", "TCP") == "TCP"
        ] or [8080]
        env = dict(os.environ)
        for c in containers:
            for e in c.get("env") or []:
                if "value" in e:
                    env[e["name"]] = e["value"]
                elif (e.get("valueFrom") or {}).get("fieldRef"):
                    path = e["valueFrom"]["fieldRef"]["fieldPath"]
                    env[e["name"]] = {
                        "metadata.name": pod["metadata"]["name"],
                        "metadata.namespace": pod["metadata"]["namespace"],
                        "status.podIP": ip,
                        "spec.nodeName": self.node,
                    }.get(path, "")
        if self.pod_netns:
            self._mount_volumes(key, pod, env)
        # The process's stdout and stderr, in CRI's format, for pods/log.
        log = ContainerLog(self.workdir / f"{key.replace('/', '_')}.log")
        self._logs[key] = log
        proc = subprocess.Popen(
            ["ip", "netns", "exec", netns, *self.command(pod, ip, ports)],
            cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, errors="replace",
        )  # fmt: skip
        run = _Run(uid=pod["metadata"]["uid"], ip=ip, proc=proc, started_at=_now(), log=log)
        run.netns = netns if self.pod_netns else None
        self._runs[key] = run
        probe = containers[0].get("readinessProbe")
        threading.Thread(target=self._follow, args=(key, run, probe is None), daemon=True).start()
        if probe is not None:
            threading.Thread(
                target=self._probe, args=(key, run, probe, containers[0]), daemon=True
            ).start()
        return run

    def _mount_volumes(self, key: str, pod: dict[str, Any], env: dict[str, str]) -> None:
        """Write the pod's secret and configMap volumes under the workdir; an env
        value under a volume's mountPath is pointed at the written copy."""
        namespace = pod["metadata"]["namespace"]
        sources: dict[str, Path] = {}
        for volume in pod["spec"].get("volumes") or []:
            target = self.workdir / "volumes" / key.replace("/", "_") / volume["name"]
            target.mkdir(parents=True, exist_ok=True)
            if "secret" in volume:
                source = volume["secret"]
                obj = self._client.get(Secret, source["secretName"], namespace=namespace)
                files = {k: base64.b64decode(v) for k, v in (obj.data or {}).items()}
            elif "configMap" in volume:
                source = volume["configMap"]
                cm = self._client.get(ConfigMap, source["name"], namespace=namespace)
                files = {k: v.encode() for k, v in (cm.data or {}).items()}
            else:
                continue
            # ``items`` projects chosen keys to paths of their own; else every key.
            paths = {i["key"]: i["path"] for i in source.get("items") or []} or {
                k: k for k in files
            }
            for name, path in paths.items():
                (target / path).parent.mkdir(parents=True, exist_ok=True)
                (target / path).write_bytes(files[name])
            sources[volume["name"]] = target
        for c in pod["spec"]["containers"]:
            for m in c.get("volumeMounts") or []:
                if (where := sources.get(m["name"])) is None:
                    continue
                mount = m["mountPath"].rstrip("/")
                for name, value in list(env.items()):
                    if value == mount or value.startswith(mount + "/"):
                        env[name] = str(where) + value[len(mount) :]

    def _follow(self, key: str, run: _Run, ready_when_serving: bool) -> None:
        assert run.proc.stdout is not None and run.proc.stderr is not None
        errors = threading.Thread(
            target=run.log.copy, args=("stderr", run.proc.stderr), daemon=True
        )
        errors.start()
        if (first := run.proc.stdout.readline()) and ready_when_serving:
            run.ready = True
            self._queue.put(key)
        if first:
            run.log.write("stdout", first)
        run.log.copy("stdout", run.proc.stdout)  # until the pod's processes end
        run.proc.wait()
        errors.join(5)
        run.log.close()
        run.exited = True
        run.done.set()
        self._queue.put(key)

    def _probe(self, key: str, run: _Run, probe: dict[str, Any], container: dict[str, Any]) -> None:
        """kubelet's readiness prober for one container, until the process ends."""
        period = float(probe.get("periodSeconds") or 10)
        timeout = float(probe.get("timeoutSeconds") or 1)
        need = {True: int(probe.get("successThreshold") or 1),
                False: int(probe.get("failureThreshold") or 3)}  # fmt: skip
        check = _probe_check(probe, container, run.ip, timeout)
        streak, last = 0, None
        if run.done.wait(float(probe.get("initialDelaySeconds") or 0)):
            return
        while True:
            started = time.monotonic()
            ok = check()
            streak = streak + 1 if ok == last else 1
            last = ok
            if streak >= need[ok] and run.ready != ok:
                run.ready = ok
                self._queue.put(key)
            if run.done.wait(max(0.0, period - (time.monotonic() - started))):
                return

    def _terminate(self, run: _Run, grace: float, pre_stop: float) -> None:
        """Like kubelet: the preStop sleep, SIGTERM, then SIGKILL at the end of the grace
        period; a preStop hook that used up the grace period leaves 2 s for SIGTERM."""
        deadline = time.monotonic() + grace
        if pre_stop and run.done.wait(min(pre_stop, grace)):
            return
        with contextlib.suppress(ProcessLookupError):
            run.proc.send_signal(signal.SIGTERM)
        if not run.done.wait(max(deadline - time.monotonic(), 2 if pre_stop >= grace else 0)):
            run.proc.kill()
        run.done.wait(10)

    def _discard(self, key: str, run: _Run) -> None:
        if self._logs.get(key) is run.log:
            del self._logs[key]  # a kubelet removes a deleted pod's logs
        if run.proc.poll() is None:
            run.proc.kill()
            run.proc.wait()
        if run.netns:
            subprocess.run(["ip", "netns", "del", run.netns], capture_output=True)
            self._free.append(run.ip)
            self._runs.pop(key, None)
            return
        subprocess.run(
            ["ip", "netns", "exec", self.netns, "ip", "addr", "del", f"{run.ip}/24", "dev",
             self.peer_if], capture_output=True,
        )  # fmt: skip
        self._free.append(run.ip)
        self._runs.pop(key, None)

    def _write_status(self, pod: dict[str, Any], run: _Run) -> None:
        spec, status = pod["spec"], pod.get("status") or {}
        current = {c["type"]: c for c in status.get("conditions") or []}
        containers_ready = run.ready and not run.exited
        gates = [g["conditionType"] for g in spec.get("readinessGates") or []]
        missing = [g for g in gates if (current.get(g) or {}).get("status") != "True"]
        ready = containers_ready and not missing
        unready = "containers with unready status"
        if not containers_ready:
            reason, message = "ContainersNotReady", unready
        else:
            reason = "ReadinessGatesNotReady"
            message = f"corresponding condition of pod readiness gate {missing} is not True"

        def condition(kind: str, ok: bool, why: str = "", text: str = "") -> dict[str, Any]:
            value = "True" if ok else "False"
            old = current.get(kind) or {}
            c: dict[str, Any] = {"type": kind, "status": value}
            c["lastTransitionTime"] = (
                old["lastTransitionTime"]
                if old.get("status") == value and old.get("lastTransitionTime")
                else _now()
            )
            # None deletes a field in a strategic merge patch: a stale
            # reason must not outlive its status.
            c["lastProbeTime"] = None
            c["reason"], c["message"] = (why, text) if not ok else (None, None)
            return c

        conditions = [
            condition("PodScheduled", True),
            condition("Initialized", True),
            condition("ContainersReady", containers_ready, "ContainersNotReady", unready),
            condition("Ready", ready, reason, message),
        ]
        state: dict[str, Any] = (
            {"terminated": {"exitCode": run.proc.returncode or 0, "reason": "Completed",
                            "startedAt": run.started_at, "finishedAt": _now()}}
            if run.exited
            else {"running": {"startedAt": run.started_at}}
        )  # fmt: skip
        want: dict[str, Any] = {
            "phase": "Running",
            "hostIP": self.node_address,
            "hostIPs": [{"ip": self.node_address}],
            "podIP": run.ip,
            "podIPs": [{"ip": run.ip}],
            "startTime": status.get("startTime") or run.started_at,
            "conditions": conditions,
            "containerStatuses": [
                {
                    "name": c["name"],
                    "image": c.get("image", ""),
                    "imageID": "",
                    "containerID": f"test://{run.uid}/{c['name']}",
                    "ready": containers_ready,
                    "started": not run.exited,
                    "restartCount": 0,
                    "state": state,
                    "lastState": {},
                }
                for c in spec["containers"]
            ],
        }
        if not _differs(want, status):
            return
        md = pod["metadata"]
        try:
            self._client.patch(
                Pod.Status, md["name"], {"status": want}, namespace=md["namespace"],
                patch_type=PatchType.STRATEGIC,
            )  # fmt: skip
        except ApiError as e:
            if e.status.code != 404:
                raise


def _probe_check(
    probe: dict[str, Any], container: dict[str, Any], ip: str, timeout: float
) -> Callable[[], bool]:
    """One try of an httpGet (2xx/3xx) or tcpSocket (connects) probe."""
    action = probe.get("httpGet") or probe.get("tcpSocket")
    if not action:
        raise ValueError(f"unsupported readinessProbe {probe}: httpGet or tcpSocket only")
    port = action["port"]
    if isinstance(port, str) and not port.isdigit():
        port = next(p["containerPort"] for p in container["ports"] if p.get("name") == port)
    port = int(port)
    if "httpGet" in probe:
        url = f"http://{ip}:{port}{action.get('path') or '/'}"
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

        def http() -> bool:
            try:
                with opener.open(url, timeout=timeout) as r:
                    return 200 <= r.status < 400
            except (urllib.error.URLError, OSError):
                return False  # HTTPError (4xx/5xx) is an URLError too

        return http

    def tcp() -> bool:
        try:
            socket.create_connection((ip, port), timeout=timeout).close()
        except OSError:
            return False
        return True

    return tcp


def _pre_stop_sleep(container: dict[str, Any]) -> float:
    pre_stop = (container.get("lifecycle") or {}).get("preStop") or {}
    return float((pre_stop.get("sleep") or {}).get("seconds") or 0)


def _differs(want: dict[str, Any], have: dict[str, Any]) -> bool:
    """Whether writing ``want`` would change ``have`` (times of unchanged states aside)."""

    def strip(v: Any) -> Any:
        if isinstance(v, dict):
            return {
                k: strip(x)
                for k, x in v.items()
                if k not in ("lastProbeTime", "finishedAt") and x is not None
            }
        if isinstance(v, list):
            return [strip(x) for x in v]
        return v

    have_conditions = {c["type"]: c for c in have.get("conditions") or []}
    for c in want["conditions"]:
        if strip(c) != strip(have_conditions.get(c["type"])):
            return True
    rest = {k: v for k, v in want.items() if k != "conditions"}
    return any(strip(v) != strip(have.get(k)) for k, v in rest.items())
