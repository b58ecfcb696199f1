"""Rollouts under load: what clients of two ferryman replicas see while a
Deployment's pods are replaced, without and with Pod readiness gates.

    .venv/bin/python -m bench.rollout [--gates] [--rollouts 10] [--replicas 5]

A real kube-apiserver with kube-controller-manager's controllers
(tools/testapiserver --controllers all) and the test kubelet
(testkit/kubelet.py) run a Deployment (RollingUpdate, maxSurge 1,
maxUnavailable 0) whose pods are real processes on addresses of their own;
an Ingress routes a host to its Service through two ferryman replicas in
Kubernetes mode (leader election on). Constant load (``--clients`` keep-alive
clients, ``--rate`` requests a second in all, each client alternating between
the replicas) runs while the pod template is changed ``--rollouts`` times, one
rollout after the other. Every answer that is not a 200 and every connection
error counts as failed.

The pods behave like an application behind a readiness probe: the process
loads for ``--start-delay`` seconds before it listens, kubelet's httpGet probe
(every ``--probe-period`` seconds) makes it ready, and on SIGTERM it serves on
for ``--term-delay`` seconds, then exits (``terminationGracePeriodSeconds``
30 bounds that).

``--gates`` labels the namespace for gate injection, puts ferryman's gate in
the pod template (so no webhook is needed) and starts ferryman with
``GATES_FLAG``; ``--webhook`` instead has the gate injected as deploy/ does:
each replica serves the readiness gate webhook, deploy/'s configuration
(failurePolicy Fail) calls it through a Service that follows the replicas'
readiness (bench/balancer.py), and every pod (the first ones too) is checked
for the gate. ``--follow-readiness`` sends each request through a replica
whose ``/nginx-ready`` a load balancer probing like deploy/'s readiness probe
finds ready, instead of alternating blindly. ``--stall S`` holds one replica's
controller still (SIGSTOP) for the first S seconds of each rollout (its NGINX
serves on): a controller that lags behind the API, the case gates are for;
``--stall-role leader`` stops whichever replica leads at that rollout's start.
Writes bench/results/rollout-<gates|webhook|no-gates>[-follow][-surge<N>-unavailable<M>]
[-stalled|-leader-stalled][-drain<S>s].json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import os
import re
import signal
import statistics
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from lightkube import Client
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Namespace, Pod
from lightkube.types import PatchType

from bench.balancer import Balancer, Probe, Replica
from bench.processes import FERRYMAN, in_work, publish, when_and_where
from ferryman.resources.readiness_gate import INJECT_ENABLED, INJECT_LABEL, gate_type
from testkit.apiserver import APIServer, apply, build, wait_until
from testkit.gates import leader_and_follower
from testkit.harness import Ferryman, free_port, ingress, path, rule
from testkit.kubelet import Kubelet
from testkit.webhook import _configuration as webhook_configuration
from testkit.webhook import wait_trusted
from testkit.workloads import deployment, rolled_out, service

# ferryman's switch for readiness gates (watch Pods of opted-in namespaces, route
# gated pods once their containers are ready, flip the gate); --gates refuses to
# run a ferryman that does not know it.
GATES_FLAG = "--readiness-gates"
INGRESS_CLASS = "ferryman"
NAMESPACE = "bench"
APP = "web"
HOST = "rollout.bench.test"
ROLLOUT_ANNOTATION = "bench.ferryman.io/rollout"
GRACE_SECONDS = 30
TERM_DELAY = 2.0  # seconds pods serve on after SIGTERM, by default
SLOW = 1.0  # seconds: a request this late hung somewhere (the load's interval is 40 ms)
WEBHOOK_CONFIGURATION = "ferryman-bench-readiness-gates"
GATE = gate_type(INGRESS_CLASS)

# -------------------------------------------------------------------- accounting


def failure_kind(error: BaseException) -> str:
    """A connection error's name in the results."""
    if isinstance(error, aiohttp.ClientConnectorError):
        if error.os_error.errno == errno.ECONNREFUSED:
            return "connection_refused"
        return "connect_error"
    if isinstance(error, aiohttp.ServerDisconnectedError):
        return "disconnected"  # the connection closed before an answer
    if isinstance(error, aiohttp.ClientOSError) and error.errno == errno.ECONNRESET:
        return "connection_reset"
    if isinstance(error, (asyncio.TimeoutError, aiohttp.ServerTimeoutError)):
        return "timeout"
    if isinstance(error, aiohttp.ClientPayloadError):
        return "truncated"
    return type(error).__name__


@dataclass
class Tally:
    """Requests and failures, by the phase of the run they were sent in."""

    phase: str = "before"
    requests: Counter[str] = field(default_factory=Counter)
    failures: dict[str, Counter[str]] = field(default_factory=dict)
    served_by: Counter[str] = field(default_factory=Counter)
    # (ferryman replica, pod) -> monotonic time of its first and last answer
    first_answer: dict[tuple[int, str], float] = field(default_factory=dict)
    last_answer: dict[tuple[int, str], float] = field(default_factory=dict)
    # Each failure: (sent, failed, kind, replica), monotonic times.
    failed_log: list[tuple[float, float, str, int]] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    not_sent: int = 0  # requests due while their client still waited for an answer
    slow: int = 0  # requests answered (or failed) after more than SLOW seconds

    def ok(self, pod: str, replica: int = 0, phase: str | None = None) -> None:
        self.requests[phase or self.phase] += 1
        self.served_by[pod] += 1
        now = time.monotonic()
        self.first_answer.setdefault((replica, pod), now)
        self.last_answer[(replica, pod)] = now

    def failed(
        self, kind: str, sent: float = 0.0, replica: int = 0, phase: str | None = None
    ) -> None:
        """``phase``: the one the request was sent in (it may fail 10 s later)."""
        phase = phase or self.phase
        self.requests[phase] += 1
        self.failures.setdefault(phase, Counter())[kind] += 1
        self.failed_log.append((sent, time.monotonic(), kind, replica))

    def failure_kinds(self) -> Counter[str]:
        return sum(self.failures.values(), Counter())


def _spread(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "max": None}
    return {"p50": round(statistics.median(values), 2), "max": round(max(values), 2)}


def lags(tally: Tally, pods: PodTimes, replicas: int) -> dict[str, Any]:
    """The windows readiness gates are about, from what clients saw:

    * routed after Ready: from a new pod's Ready (as polled from the API) to
      its first answer through the later of the ferryman replicas; without
      gates the Deployment goes on (deletes an old pod) in this window, with
      gates Ready waits for every replica, so it is at most 0 (and the
      polling's resolution, 0.1 s);
    * answered after deletion: from an old pod's deletion to its last answer
      through any replica: how long ferryman still sent it requests;
    * failed sent after a deletion: how long after the latest pod deletion
      each failed request was sent (failures of terminating pods come soon
      after one).
    """
    routed, after_deletion, never = [], [], 0
    for pod, ready in pods.ready.items():
        firsts = [tally.first_answer.get((r, pod)) for r in range(replicas)]
        if pod in pods.initial:
            continue
        if None in firsts:
            never += 1
            continue
        routed.append(max(f for f in firsts if f is not None) - ready)
    for pod, deleted in pods.deleted.items():
        lasts = [t for (r, p), t in tally.last_answer.items() if p == pod]
        if lasts:
            after_deletion.append(max(lasts) - deleted)
    # Failures against pod deletions: a failed request sent this long after
    # the last deletion before it.
    deletions = sorted(pods.deleted.values())
    since = [
        t - max(d for d in deletions if d <= t)
        for t, _, _, _ in tally.failed_log
        if deletions and deletions[0] <= t
    ]

    def at(t: float | None) -> float | None:
        return None if t is None else round(t - tally.started, 2)

    return {
        "failed_sent_after_a_deletion_s": _spread(since),
        # A timeline to read failures against, in seconds since the load began.
        "failures": [
            {"sent_s": at(sent), "took_s": round(done - sent, 2), "kind": kind, "replica": r}
            for sent, done, kind, r in tally.failed_log[:200]
        ],
        "pod_timeline": {
            pod: {"ready_s": at(pods.ready.get(pod)), "deleted_s": at(pods.deleted.get(pod))}
            for pod in sorted(pods.ready.keys() | pods.deleted.keys())
        },
        "routed_after_ready_s": _spread(routed),
        "new_pods_never_answering": never,
        "answered_after_deletion_s": _spread(after_deletion),
    }


def summary(tally: Tally, rollouts: list[dict[str, Any]]) -> dict[str, Any]:
    """The results: requests, failures (by kind and by rollout), rollout durations."""
    complete = [r["complete_s"] for r in rollouts]
    settled = [r["old_pods_gone_s"] for r in rollouts]
    kinds = tally.failure_kinds()
    return {
        "requests": sum(tally.requests.values()),
        "failed": sum(kinds.values()),
        "failed_by_kind": dict(sorted(kinds.items())),
        "not_sent_while_waiting": tally.not_sent,
        f"slower_than_{SLOW:g}s": tally.slow,
        "failed_by_phase": {
            phase: sum(c.values()) for phase, c in sorted(tally.failures.items()) if c
        },
        "rollout_s": {**_spread(complete), "total": round(sum(complete), 2)},
        "old_pods_gone_s": _spread(settled),
        "rollouts": rollouts,
    }


# -------------------------------------------------------------------- load


async def ask(
    session: aiohttp.ClientSession, url: str, host: str, replica: int, tally: Tally
) -> float:
    """One request of the load, its answer tallied (the pod that answered, or why
    none did, in the phase it was sent in); returns when it was sent."""
    sent, phase = time.monotonic(), tally.phase
    try:
        async with session.get(url, headers={"Host": host}) as r:
            body = await r.read()
            if r.status == 200:
                pod = body.split(b'"', 4)[3].decode()  # {"name": "<pod>", ...
                tally.ok(pod, replica, phase)
            else:
                tally.failed(str(r.status), sent, replica, phase)
    except (TimeoutError, aiohttp.ClientError) as e:
        tally.failed(failure_kind(e), sent, replica, phase)
    return sent


def next_due(tally: Tally, sent: float, due: float, interval: float) -> float:
    """When a client's next request is due. A client waits for its answer: the
    requests it would have sent meanwhile are not sent (and so cannot fail);
    count them, and the slow answer."""
    if time.monotonic() - sent > SLOW:
        tally.slow += 1
    late = time.monotonic() - (due + interval)
    if late > 0:
        tally.not_sent += int(late / interval)
    return max(due + interval, time.monotonic())


# Which replica the n-th request of a client goes through; None: no replica to send to.
Pick = Callable[[int], "int | None"]


def alternating(count: int) -> Pick:
    return lambda n: n % count


def following(balancer: Balancer) -> Pick:
    """Replicas in turn among those the balancer finds ready."""
    index = {r.name: i for i, r in enumerate(balancer.replicas)}

    def pick(n: int) -> int | None:
        ready = balancer.ready()
        return index[ready[n % len(ready)].name] if ready else None

    return pick


async def _client(
    index: int, ports: list[int], pick: Pick, interval: float, tally: Tally, stop: asyncio.Event
) -> None:
    """One keep-alive client: a request every ``interval`` seconds (the schedule
    restarts after a late answer instead of bursting), through the replica
    ``pick`` names (no replica ready: the request fails, as at a balancer
    with no backend)."""
    timeout = aiohttp.ClientTimeout(total=10)
    connector = aiohttp.TCPConnector(limit_per_host=1)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        n = index
        due = time.monotonic() + interval * index / len(ports) / 4
        while not stop.is_set():
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            replica = pick(n)
            n += 1
            if replica is None:
                tally.failed("no_ready_replica", time.monotonic())
                sent = time.monotonic()
            else:
                url = f"http://127.0.0.1:{ports[replica]}/load/{n}"
                sent = await ask(session, url, HOST, replica, tally)
            due = next_due(tally, sent, due, interval)


async def load(
    ports: list[int], pick: Pick, clients: int, rate: float, tally: Tally, stop: asyncio.Event
) -> None:
    interval = clients / rate
    await asyncio.gather(*(_client(i, ports, pick, interval, tally, stop) for i in range(clients)))


# -------------------------------------------------------------------- the cluster


def app_deployment(args: argparse.Namespace) -> dict[str, Any]:
    d = deployment(APP, NAMESPACE, args.replicas, "v1")
    spec = d["spec"]
    spec["strategy"] = {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": args.max_surge, "maxUnavailable": args.max_unavailable},
    }
    pod = spec["template"]["spec"]
    pod["terminationGracePeriodSeconds"] = GRACE_SECONDS
    (container,) = pod["containers"]
    container["env"] = [
        {"name": "START_DELAY", "value": str(args.start_delay)},
        {"name": "TERM_DELAY", "value": str(args.term_delay)},
    ]
    container["readinessProbe"] = {
        "httpGet": {"path": "/healthz", "port": 8080},
        "periodSeconds": args.probe_period,
        "failureThreshold": 3,
    }
    if args.gates and not args.webhook:
        pod["readinessGates"] = [{"conditionType": GATE}]
    return d


@dataclass
class PodTimes:
    """When each pod was first seen Ready, and first seen deleted (monotonic):
    terminating, or already gone (a pod that exits at SIGTERM may be gone
    between two polls); and whether each pod has the gate (the first ones
    and every one a rollout made)."""

    initial: set[str] = field(default_factory=set)
    ready: dict[str, float] = field(default_factory=dict)
    deleted: dict[str, float] = field(default_factory=dict)
    gated: dict[str, bool] = field(default_factory=dict)

    def poll(self, kube: Client, stop: threading.Event, interval: float = 0.1) -> None:
        seen: set[str] = set(self.initial)
        while not stop.wait(interval):
            now = time.monotonic()
            listed = pods(kube)
            names = {p.metadata.name for p in listed}
            for gone in seen - names:
                self.deleted.setdefault(gone, now)
            seen |= names
            for p in listed:
                name = p.metadata.name
                if name not in self.gated:
                    gates = (p.spec and p.spec.readinessGates) or []
                    self.gated[name] = any(g.conditionType == GATE for g in gates)
                if p.metadata.deletionTimestamp:
                    self.deleted.setdefault(name, now)
                conditions = (p.status and p.status.conditions) or []
                if any(c.type == "Ready" and c.status == "True" for c in conditions):
                    self.ready.setdefault(name, now)


def pods(kube: Client) -> list[Pod]:
    return list(kube.list(Pod, namespace=NAMESPACE, labels={"app": APP}))


def settled(kube: Client, replicas: int) -> bool:
    """Rolled out and no pod of an older template left, not even terminating."""
    if not rolled_out(kube, NAMESPACE, APP, replicas):
        return False
    hashes = {p.metadata.labels.get("pod-template-hash") for p in pods(kube)}
    return len(hashes) == 1 and len(pods(kube)) == replicas


def roll(kube: Client, i: int, replicas: int, tally: Tally) -> dict[str, Any]:
    tally.phase = f"rollout {i}"
    started = time.monotonic()
    kube.patch(
        Deployment, APP, namespace=NAMESPACE, patch_type=PatchType.MERGE,
        obj={"spec": {"template": {"metadata": {"annotations": {ROLLOUT_ANNOTATION: str(i)}}}}},
    )  # fmt: skip
    wait_until(lambda: rolled_out(kube, NAMESPACE, APP, replicas), 600, f"rollout {i}")
    complete = time.monotonic() - started
    wait_until(lambda: settled(kube, replicas), 600, f"rollout {i}: old pods gone")
    return {
        "complete_s": round(complete, 2),
        "old_pods_gone_s": round(time.monotonic() - started, 2),
    }


@contextlib.contextmanager
def stalled(replica: Ferryman, seconds: float) -> Iterator[None]:
    """Holds ``replica``'s controller still (SIGSTOP) for the first ``seconds``
    of what the block does: a controller that lags behind the API (starved of
    CPU, a stalled watch) while its NGINX serves on with what it last applied."""
    assert replica.proc is not None
    pid = replica.proc.pid
    if seconds <= 0:
        yield
        return
    os.kill(pid, signal.SIGSTOP)
    wake = threading.Timer(seconds, os.kill, (pid, signal.SIGCONT))
    wake.start()
    try:
        yield
    finally:
        wake.cancel()
        os.kill(pid, signal.SIGCONT)


def check_gates_flag() -> None:
    out = subprocess.run(
        [str(FERRYMAN), "run", "--help"], capture_output=True, text=True, check=True
    ).stdout
    if not re.search(rf"{re.escape(GATES_FLAG)}(?![\w-])", out):
        raise SystemExit(
            f"--gates: `ferryman run` has no {GATES_FLAG} option (readiness gates not "
            f"built yet, or named otherwise: set GATES_FLAG in {__file__})"
        )


_UPSTREAM_CAUSE = re.compile(
    r"\(\d+: [^)]+\)|upstream prematurely closed|no live upstreams|upstream timed out"
)


def upstream_errors(logs: list[str]) -> dict[str, int]:
    """NGINX's failed attempts at peers, by cause: those retried on another peer
    are masked from clients, so these show what the retries absorbed."""
    causes: Counter[str] = Counter()
    for text in logs:
        for line in text.splitlines():
            if "upstream" in line and (m := _UPSTREAM_CAUSE.search(line)):
                causes[m.group(0)] += 1
    return dict(causes)


def webhook_args(port: int) -> list[str]:
    """A replica serving the readiness gate webhook on ``port``, with one
    certificate Secret for all replicas, keeping the configuration's caBundle."""
    return [
        "--readiness-gate-webhook-port", str(port),
        "--readiness-gate-webhook-cert-secret", f"{NAMESPACE}/webhook-cert",
        "--readiness-gate-webhook-cert-hosts", "127.0.0.1",
        "--readiness-gate-webhook-configuration", WEBHOOK_CONFIGURATION,
    ]  # fmt: skip


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    if args.gates:
        check_gates_flag()
    server = APIServer(build(), work / "apiserver", "--controllers", "all")
    server.start()
    kubelet: Kubelet | None = None
    balancer: Balancer | None = None
    replicas: list[Ferryman] = []
    try:
        kube = server.client()
        # index 1: its own namespace and network, should a test run it beside the
        # kubelet fixture (index 0) in one process.
        kubelet = Kubelet(server.kubeconfig, work / "kubelet", index=1)
        kubelet.start()
        labels = {INJECT_LABEL: INJECT_ENABLED} if args.gates else {}
        kube.create(Namespace(metadata=ObjectMeta(name=NAMESPACE, labels=labels)))
        proxy_port, hooks = free_port(), [free_port(), free_port()]
        if args.webhook:
            # deploy/'s configuration, through the balancer: the replicas fill in
            # its caBundle as they start.
            apply(kube, webhook_configuration(WEBHOOK_CONFIGURATION, NAMESPACE, proxy_port))
        for i in range(2):
            f = Ferryman(
                work / f"ferryman-{i}",
                extra_args=[
                    "--watch-namespace", NAMESPACE, "--ingress-class", INGRESS_CLASS,
                    "--log-level", "warning", *([GATES_FLAG] if args.gates else []),
                    *(webhook_args(hooks[i]) if args.webhook else []),
                ],
                kubeconfig=server.kubeconfig,
                env={"POD_NAME": f"ferryman-{i}", "POD_NAMESPACE": NAMESPACE},
            )  # fmt: skip
            f.start(wait=False)
            replicas.append(f)
        balancer = Balancer(
            [Replica(str(i), f.ready_port, hooks[i]) for i, f in enumerate(replicas)],
            Probe(period=args.probe_every),
            proxy_port if args.webhook else None,
        )
        balancer.start()
        for f in replicas:
            f.wait_ready(60)
        if args.webhook:
            wait_trusted(kube, WEBHOOK_CONFIGURATION, 30)
        # The Service and Ingress first, known to both replicas (the host answers,
        # 503 without endpoints): the webhook gates only pods a route serves, so
        # pods created before their route are rightly not gated.
        apply(kube, service(APP, NAMESPACE))
        apply(kube, ingress(APP, [rule(HOST, path("/", APP))], namespace=NAMESPACE))
        for f in replicas:
            wait_until(lambda f=f: f.get(HOST, "/").status != 404, 60, "the route")
        apply(kube, app_deployment(args))
        wait_until(lambda: rolled_out(kube, NAMESPACE, APP, args.replicas), 120, "first pods")
        first = {p.metadata.name for p in pods(kube)}
        for f in replicas:
            wait_until(
                lambda f=f: {f.get(HOST, f"/warm/{i}").served_by for i in range(30)} == first,
                60,
                "both replicas route to every pod",
            )
        pick = following(balancer) if args.follow_readiness else alternating(len(replicas))
        result = asyncio.run(_measure(args, kube, pick, replicas))
        result["webhook_connections_proxied"] = balancer.proxied
        result["webhook_connections_without_a_ready_replica"] = balancer.proxy_refused
        return result
    finally:
        if balancer is not None:
            balancer.stop()
        for f in replicas:
            if f.proc is not None:
                f.stop()
        if kubelet is not None:
            kubelet.stop()
        server.stop()


def to_stall(args: argparse.Namespace, kube: Client, replicas: list[Ferryman]) -> Ferryman:
    """The replica ``--stall-role`` names, at this moment (leadership may have
    moved while the last leader was stopped)."""
    if args.stall_role == "follower":
        return replicas[-1]
    named = {str(i): f for i, f in enumerate(replicas)}
    leader, _ = leader_and_follower(kube, NAMESPACE, named)
    return leader


async def _measure(
    args: argparse.Namespace, kube: Client, pick: Pick, replicas: list[Ferryman]
) -> dict[str, Any]:
    tally, stop = Tally(), asyncio.Event()
    times, polling = PodTimes(initial={p.metadata.name for p in pods(kube)}), threading.Event()
    poller = threading.Thread(target=times.poll, args=(kube, polling), daemon=True)
    poller.start()
    ports = [f.http_port for f in replicas]
    clients = asyncio.create_task(load(ports, pick, args.clients, args.rate, tally, stop))
    rollouts: list[dict[str, Any]] = []

    def drive() -> None:
        time.sleep(args.settle)
        for i in range(1, args.rollouts + 1):
            target = to_stall(args, kube, replicas)
            with stalled(target, args.stall):
                rollouts.append(roll(kube, i, args.replicas, tally))
            rollouts[-1]["stalled_replica"] = target.workdir.name
            print(f"rollout {i}: {rollouts[-1]}", flush=True)
        tally.phase = "after"
        time.sleep(args.settle)

    try:
        await asyncio.to_thread(drive)
    finally:
        stop.set()
        polling.set()
        await clients
        poller.join()
    result = summary(tally, rollouts)
    result.update(lags(tally, times, len(ports)))
    result["pods_answering"] = len(tally.served_by)
    result["pods"] = len(times.gated)
    result["pods_gated"] = sum(times.gated.values())
    result["pods_without_gate"] = sorted(name for name, gated in times.gated.items() if not gated)
    result["nginx_upstream_errors"] = upstream_errors([f.logs() for f in replicas])
    return result


def table(result: dict[str, Any]) -> str:
    r = result
    kinds = ", ".join(f"{k} {v}" for k, v in r["failed_by_kind"].items()) or "-"

    def spread(key: str) -> str:
        return f"p50 {r[key]['p50']}  max {r[key]['max']}"

    stall, role = r["replica_stalled_s"], r["stalled_role"]
    strategy = r["strategy"]
    rows = [
        ("mode", r["mode"] + (f", the {role} stalled {stall} s per rollout" if stall else "")),
        ("clients", "follow readiness" if r["clients_follow_readiness"] else "alternate"),
        (
            "rollouts",
            f"{len(r['rollouts'])} x {r['replicas']} pods, maxSurge {strategy['max_surge']}"
            f" maxUnavailable {strategy['max_unavailable']}",
        ),
        ("pods gated", f"{r['pods_gated']} of {r['pods']}"),
        ("requests", r["requests"]),
        ("failed", f"{r['failed']}  ({kinds})"),
        ("not sent, client waiting", r["not_sent_while_waiting"]),
        (f"slower than {SLOW:g} s", r[f"slower_than_{SLOW:g}s"]),
        ("rollout s", f"{spread('rollout_s')}  total {r['rollout_s']['total']}"),
        ("old pods gone s", spread("old_pods_gone_s")),
        ("routed after Ready s", spread("routed_after_ready_s")),
        ("answered after deletion s", spread("answered_after_deletion_s")),
        ("failed, sent after deletion", spread("failed_sent_after_a_deletion_s")),
        ("NGINX upstream errors", r["nginx_upstream_errors"] or "-"),
    ]
    return "\n".join(f"{k:<27} {v}" for k, v in rows)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--gates", action="store_true", help="with Pod readiness gates")
    ap.add_argument(
        "--webhook", action="store_true",
        help="gates injected by the replicas' webhook, called through a Service\n"
        "that follows their readiness (implies --gates)",
    )  # fmt: skip
    ap.add_argument(
        "--follow-readiness", action="store_true",
        help="clients send through replicas a load balancer probing /nginx-ready\n"
        "finds ready (default: alternate between both)",
    )  # fmt: skip
    ap.add_argument(
        "--probe-every", type=float, default=1.0,
        help="seconds between the balancer's /nginx-ready probes (deploy/'s period)",
    )  # fmt: skip
    ap.add_argument("--max-surge", type=int, default=1, help="the Deployment's maxSurge")
    ap.add_argument(
        "--max-unavailable", type=int, default=0, help="the Deployment's maxUnavailable"
    )
    ap.add_argument("--rollouts", type=int, default=10)
    ap.add_argument("--replicas", type=int, default=5, help="the Deployment's pods")
    ap.add_argument("--clients", type=int, default=8, help="concurrent keep-alive clients")
    ap.add_argument("--rate", type=float, default=200, help="requests a second, in all")
    ap.add_argument("--start-delay", type=float, default=1.0, help="pod load time, seconds")
    ap.add_argument("--probe-period", type=int, default=1, help="readiness probe period")
    ap.add_argument("--term-delay", type=float, default=TERM_DELAY, help="serving after SIGTERM, s")
    ap.add_argument(
        "--stall", type=float, default=0,
        help="hold one replica's controller still (SIGSTOP) for the first\n"
        "SECONDS of each rollout: a lagging controller (default 0: off)",
    )  # fmt: skip
    ap.add_argument(
        "--stall-role", choices=("follower", "leader"), default="follower",
        help="which replica --stall stops: the second one, or the leader of the moment",
    )  # fmt: skip
    ap.add_argument("--settle", type=float, default=3, help="load before and after, s")
    ap.add_argument("--out", type=Path, default=Path("bench/results"))
    ap.add_argument("--work", type=Path, help="keep logs and state here (default: a temp dir)")
    args = ap.parse_args(argv)
    args.gates = args.gates or args.webhook
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse(argv)
    result = in_work(lambda work: run(args, work), args.work, "fbench-rollout-")
    result = {
        **when_and_where(),
        "mode": "webhook" if args.webhook else "gates" if args.gates else "no-gates",
        "clients_follow_readiness": args.follow_readiness,
        "strategy": {"max_surge": args.max_surge, "max_unavailable": args.max_unavailable},
        "replicas": args.replicas,
        "load": {"clients": args.clients, "rate_per_s": args.rate, "ferryman_replicas": 2},
        "pods": {
            "start_delay_s": args.start_delay,
            "readiness_probe_period_s": args.probe_period,
            "term_delay_s": args.term_delay,
            "termination_grace_period_s": GRACE_SECONDS,
        },
        "replica_stalled_s": args.stall,
        "stalled_role": args.stall_role,
        **result,
    }
    variant = "".join(
        (
            "-follow" if args.follow_readiness else "",
            f"-surge{args.max_surge}-unavailable{args.max_unavailable}"
            if (args.max_surge, args.max_unavailable) != (1, 0)
            else "",
            ("-leader" if args.stall_role == "leader" else "") + "-stalled" if args.stall else "",
            "" if args.term_delay == TERM_DELAY else f"-drain{args.term_delay:g}s",
        )
    )
    publish(result, table(result), args.out / f"rollout-{result['mode']}{variant}.json")
    return result


if __name__ == "__main__":
    main()
