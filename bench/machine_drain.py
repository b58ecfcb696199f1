"""A Machine deleted under load: what clients of two ferryman replicas see while
the Machine hosting two backend pods and one of the replicas goes, with and
without ferryman's machine lifecycle hook (issue 14).

    .venv/bin/python -m bench.machine_drain [--hook] [--term-delay 0] [--rate 150]

The cluster is bench/rollout.py's: a real kube-apiserver with
kube-controller-manager's controllers (tools/testapiserver --controllers all),
so the Deployment, ReplicaSet and EndpointSlice controllers are Kubernetes'
own. The Machine API is ``ferryman machine-controller`` (the Machine CRD from
deploy/crds, its local provider: the instance is a file in ``--instances-dir``;
no webhook, nothing here changes hooks of a Machine being deleted). Two test
kubelets (testkit/kubelet.py) are two Nodes: the Machine's and a
shared one.

The Deployment ``web`` (pods answer with their names; a readiness probe,
``--start-delay`` before they listen, ``--term-delay`` of serving after
SIGTERM, as in bench/rollout.py) gets two pods on each Node, as a scheduler
would place them: the Machine's kubelet binds the first two, then only the
shared one binds and the Deployment is scaled to 4, so the ReplicaSet's
replacements for the evicted pods land on the shared Node.

Two ferryman replicas run as processes (Kubernetes mode, leader election on,
``--shutdown-grace-period``), one told it runs on each Node (``NODE_NAME``);
``--hook`` adds ``--machine-lifecycle-hooks openshift``. The shared Node's
replica starts first, so it normally leads (``--leader machine``: the
other; the results say which led). The load (``--clients`` keep-alive
clients, ``--rate`` requests a second in all, each answer delayed
``--request-delay`` seconds by the pod) goes only to the replicas whose
``/nginx-ready`` answered 200 at the last health check (every
``--health-interval`` seconds), as an external load balancer's would. Every
answer that is not a 200, every connection error and every request with no
ready replica to go to counts as failed.

Then the Machine is deleted, and the machine controller walks it: hooks,
cordon, evictions, instance deletion, Node deletion. The replica on the
Machine's Node is evicted like the backends: it has a pod there, whose process
(run by that Node's kubelet) passes the kubelet's SIGTERM on to the ferryman
process and lives as long as it does, so the drain waits for the replica's
graceful stop as for a pod of a Deployment. The kubelet is a process, not a
pod, so the bench plays what the cluster would do to it: once the instance is
deleted (its file gone) the Node's kubelet stops and its network goes (the
machine is gone: what ran there dies with it, a replica still running too).
Where this differs from the issue's words: the replica's eviction is the drain's
own (rather than the bench's SIGTERM when the drain reaches the Node); its pod
is named otherwise than its POD_NAME, so ferryman takes the replica's word for
its readiness (its pod's Ready is the relay's); and a vanished replica refuses
connections (loopback ports) where a vanished machine's address would time out.

Measured: requests and failures by kind and by the phase of the deletion they
were sent in (``before``; ``hooks`` until the cordon: the pre-drain hooks held
it; ``drain`` until ``Drained``; ``terminate`` until the instance went:
pre-terminate hooks; ``removal`` until the Machine was gone; ``after``), the
time from the deletion to the Machine gone, how long ferryman's hook held the
drain (its Events ``IngressTrafficDraining``/``IngressTrafficDrained``), and
when each step was seen. Writes bench/results/machine-drain-<hook|no-hook>
[-term<S>s][-req<S>s][-leader-on-machine].json (a ``--term-delay`` other than
the default, a ``--request-delay``, ``--leader machine``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from lightkube import Client
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import Node, Pod

from bench.drain_cluster import (
    APP,
    HOST,
    MACHINE,
    MACHINE_NAMESPACE,
    NAMESPACE,
    NODES,
    REPLICA_POD,
    Cluster,
    Machine,
    drained,
    instance,
    leader,
    machine,
    machine_events,
    pods_on,
)
from bench.processes import in_work, publish, when_and_where
from bench.rollout import SLOW, Tally, ask, next_due, upstream_errors
from testkit.apiserver import wait_until
from testkit.workloads import rolled_out

TERM_DELAY = 2.0  # seconds pods serve on after SIGTERM, by default (bench/rollout.py's)
PHASES = ("before", "hooks", "drain", "terminate", "removal", "after")
# The moment each phase begins (a Timeline mark).
PHASE_STARTS = {
    "deleted": "hooks",
    "cordoned": "drain",
    "drained": "terminate",
    "instance_deleted": "removal",
    "machine_gone": "after",
}
REPLICA_STEPS = ("replica_unready", "replica_evicted", "replica_exited", "replica_killed")


# -------------------------------------------------------------------- pure parts


@dataclass
class Balancer:
    """An external load balancer in front of the replicas: it sends only to
    those whose readiness answered 200 at its last health check, in turn."""

    ready: list[bool]

    def choose(self, n: int) -> int | None:
        """The replica for the ``n``-th request; None when none is ready."""
        up = [i for i, ok in enumerate(self.ready) if ok]
        return up[n % len(up)] if up else None


@dataclass
class Timeline:
    """When each step of the deletion was first seen, in seconds since the
    deletion; a mark in PHASE_STARTS moves the tally's phase on (never back,
    should a later step be seen first)."""

    tally: Tally
    started: float = 0.0  # monotonic time of the deletion
    wall: float = 0.0  # and its wall-clock time (Events carry those)
    marks: dict[str, float] = field(default_factory=dict)

    def mark(self, what: str, now: float | None = None) -> bool:
        """True the first time ``what`` is marked."""
        if what in self.marks:
            return False
        now = time.monotonic() if now is None else now
        if what == "deleted":
            self.started, self.wall = now, time.time()
        self.marks[what] = round(now - self.started, 2)
        phase = PHASE_STARTS.get(what)
        if phase and PHASES.index(phase) > PHASES.index(self.tally.phase):
            self.tally.phase = phase
        return True

    def since(self, t: float | None) -> float | None:
        """A monotonic time as seconds since the deletion."""
        return None if t is None else round(t - self.started, 2)


def hook_hold(events: list[tuple[str, float]]) -> dict[str, Any] | None:
    """How long ferryman's pre-drain hook held the drain, from its Events
    ((reason, seconds since the deletion), oldest first): from the deletion (the
    machine controller waits from its first look) to the Event that says the
    hook went. None when ferryman wrote none."""
    times: dict[str, float] = {}
    for reason, t in events:
        times.setdefault(reason, t)
    announced = times.get("IngressTrafficDraining")
    released, result = times.get("IngressTrafficDrained"), "drained"
    if released is None and "IngressTrafficDrainTimedOut" in times:
        released, result = times["IngressTrafficDrainTimedOut"], "timed out"
    if announced is None and released is None:
        return None
    return {
        "held_s": released,
        "result": result if released is not None else "never released",
        "draining_event_s": announced,
        "between_events_s": (
            None if announced is None or released is None else round(released - announced, 2)
        ),
    }


def result_name(
    hook: bool, term_delay: float, request_delay: float = 0.0, leader: str = "shared"
) -> str:
    variant = "" if term_delay == TERM_DELAY else f"-term{term_delay:g}s"
    variant += f"-req{request_delay:g}s" if request_delay else ""
    variant += "-leader-on-machine" if leader == "machine" else ""
    return f"machine-drain-{'hook' if hook else 'no-hook'}{variant}.json"


def summary(tally: Tally, timeline: Timeline) -> dict[str, Any]:
    kinds = tally.failure_kinds()
    return {
        "requests": sum(tally.requests.values()),
        "failed": sum(kinds.values()),
        "failed_by_kind": dict(sorted(kinds.items())),
        "requests_by_phase": {p: tally.requests[p] for p in PHASES if tally.requests[p]},
        "failed_by_phase": {
            p: dict(sorted(tally.failures[p].items())) for p in PHASES if tally.failures.get(p)
        },
        "not_sent_while_waiting": tally.not_sent,
        f"slower_than_{SLOW:g}s": tally.slow,
        "deletion_s": timeline.marks.get("machine_gone"),
        "timeline_s": dict(sorted(timeline.marks.items(), key=lambda kv: kv[1])),
        "failures": [
            {
                "sent_s": timeline.since(sent),
                "took_s": round(done - sent, 2),
                "kind": kind,
                "replica": replica,
            }
            for sent, done, kind, replica in tally.failed_log[:200]
        ],
    }


def table(r: dict[str, Any]) -> str:
    kinds = ", ".join(f"{k} {v}" for k, v in r["failed_by_kind"].items()) or "-"
    phases = ", ".join(f"{p} {sum(c.values())}" for p, c in r["failed_by_phase"].items()) or "-"
    marks = r["timeline_s"]
    hold = r["hook"]
    held = f"{hold['held_s']} s ({hold['result']})" if hold else "-"

    def at(*names: str) -> str:
        return "  ".join(f"{n} {marks[n]}" for n in names if n in marks) or "-"

    rows = [
        ("mode", f"{r['mode']}, pods serve {r['pods']['term_delay_s']:g} s after SIGTERM"),
        ("requests", r["requests"]),
        ("failed", f"{r['failed']}  ({kinds})"),
        ("failed by phase", phases),
        ("Machine deleted in s", r["deletion_s"]),
        ("hook held the drain", held),
        ("steps, s after deletion", at("cordoned", "drained", "instance_deleted", "machine_gone")),
        ("Node's replica, s", at(*REPLICA_STEPS)),
        ("last answer from its pods", r["last_answer_s"]["machine_pods"]),
        ("last answer through it", r["last_answer_s"]["machine_replica"]),
        ("leader", r["ferryman"]["leader"]),
        ("NGINX upstream errors", r["nginx_upstream_errors"] or "-"),
    ]
    return "\n".join(f"{k:<26} {v}" for k, v in rows)


# -------------------------------------------------------------------- load


async def _healthy(session: aiohttp.ClientSession, port: int) -> bool:
    try:
        async with session.get(f"http://127.0.0.1:{port}/nginx-ready") as r:
            return r.status == 200
    except (TimeoutError, aiohttp.ClientError):
        return False


async def health_checks(
    ports: list[int], balancer: Balancer, interval: float, stop: asyncio.Event,
    changes: list[tuple[float, int, bool]],
) -> None:  # fmt: skip
    """The load balancer's health checks (each on a new connection, as most
    send them); ``changes``: (monotonic time, replica, ready) of each change."""
    # kubelet's probe timeout: a check that took longer failed.
    timeout = aiohttp.ClientTimeout(total=1.0)
    connector = aiohttp.TCPConnector(force_close=True)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        while not stop.is_set():
            seen = await asyncio.gather(*(_healthy(session, p) for p in ports))
            for i, ok in enumerate(seen):
                if ok != balancer.ready[i]:
                    changes.append((time.monotonic(), i, ok))
            balancer.ready = list(seen)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), interval)


async def _client(
    index: int, clients: int, ports: list[int], balancer: Balancer, interval: float,
    tally: Tally, stop: asyncio.Event, delay: float,
) -> None:  # fmt: skip
    """One keep-alive client: a request every ``interval`` seconds (a late
    answer restarts the schedule rather than bursting), to the replicas the
    balancer finds ready, in turn."""
    timeout = aiohttp.ClientTimeout(total=10)
    connector = aiohttp.TCPConnector(limit_per_host=1)
    query = f"?delay={delay:g}" if delay else ""
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        n = index
        due = time.monotonic() + interval * index / clients  # spread over one interval
        while not stop.is_set():
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            replica = balancer.choose(n)
            n += 1
            if replica is None:
                sent = time.monotonic()
                tally.failed("no_ready_replica", sent, -1, tally.phase)
            else:
                url = f"http://127.0.0.1:{ports[replica]}/load/{n}{query}"
                sent = await ask(session, url, HOST, replica, tally)
            due = next_due(tally, sent, due, interval)


def watch_deletion(kube: Client, cluster: Cluster, timeline: Timeline) -> None:
    """Deletes the Machine and follows its deletion every 0.1 s, playing the
    cluster's part for the kubelet on its Node (module doc)."""
    node = NODES["machine"][0]
    f = cluster.replicas["machine"]
    assert f.proc is not None
    timeline.mark("deleted")
    kube.delete(Machine, MACHINE, namespace=MACHINE_NAMESPACE)
    deadline = time.monotonic() + cluster.args.timeout
    while True:
        time.sleep(0.1)
        if time.monotonic() > deadline:
            raise TimeoutError(f"the Machine still exists after {cluster.args.timeout} s")
        if "cordoned" not in timeline.marks:
            try:
                cordoned = bool(kube.get(Node, node).spec.unschedulable)
            except ApiError as e:
                cordoned = e.status.code == 404
            if cordoned:
                timeline.mark("cordoned")
        if "replica_evicted" not in timeline.marks:
            try:
                evicted = bool(
                    kube.get(Pod, REPLICA_POD, namespace=NAMESPACE).metadata.deletionTimestamp
                )
            except ApiError as e:
                evicted = e.status.code == 404
            if evicted:
                timeline.mark("replica_evicted")
        if f.proc.poll() is not None and "replica_killed" not in timeline.marks:
            timeline.mark("replica_exited")
        m = machine(kube)
        if m is not None and drained(m):
            timeline.mark("drained")
        if not instance(cluster.instances).exists() and timeline.mark("instance_deleted"):
            if f.proc.poll() is None:
                timeline.mark("replica_killed")
            cluster.machine_gone()
        if cluster.kubelet_stopped.is_set():
            timeline.mark("kubelet_stopped")
        if m is None:
            timeline.mark("machine_gone")
            return


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    cluster = Cluster(args, work)
    try:
        kube = cluster.start()
        return asyncio.run(_measure(args, kube, cluster))
    finally:
        cluster.stop()


async def _measure(args: argparse.Namespace, kube: Client, cluster: Cluster) -> dict[str, Any]:
    roles = list(cluster.replicas)
    ports = [cluster.replicas[r].http_port for r in roles]
    ready_ports = [cluster.replicas[r].ready_port for r in roles]
    tally, stop = Tally(), asyncio.Event()
    timeline = Timeline(tally)
    balancer = Balancer([True] * len(ports))
    changes: list[tuple[float, int, bool]] = []
    machine_pods = pods_on(kube, NODES["machine"][0])
    led = leader(kube)
    checks = asyncio.create_task(
        health_checks(ready_ports, balancer, args.health_interval, stop, changes)
    )
    interval = args.clients / args.rate
    clients = [
        asyncio.create_task(
            _client(i, args.clients, ports, balancer, interval, tally, stop, args.request_delay)
        )
        for i in range(args.clients)
    ]  # fmt: skip

    def drive() -> None:
        time.sleep(args.settle)
        watch_deletion(kube, cluster, timeline)
        wait_until(lambda: rolled_out(kube, NAMESPACE, APP, 4), 120, "the replacements")
        timeline.mark("replaced")
        time.sleep(args.settle)

    try:
        await asyncio.to_thread(drive)
    finally:
        stop.set()
        await asyncio.gather(checks, *clients)
    machine_index = roles.index("machine")
    for t, i, ok in changes:
        if i == machine_index and not ok:
            timeline.marks.setdefault("replica_unready", timeline.since(t) or 0.0)
    events = machine_events(kube, timeline.wall)
    result = summary(tally, timeline)
    answered_by_pods = [t for (_, pod), t in tally.last_answer.items() if pod in machine_pods]
    through = [t for (r, _), t in tally.last_answer.items() if r == machine_index]
    shared = cluster.replicas["shared"]
    result.update(
        {
            "events": [{"reason": r, "s": t} for r, t in events],
            "hook": hook_hold(events),
            "last_answer_s": {
                "machine_pods": timeline.since(max(answered_by_pods, default=None)),
                "machine_replica": timeline.since(max(through, default=None)),
            },
            "pods_answering": len(tally.served_by),
            "ferryman": {
                "leader": led,
                "shutdown_grace_period_s": args.grace,
                "machine_drain_timeout_s": args.drain_timeout if args.hook else None,
                "drain_metrics": {
                    k: v for k, v in shared.metrics().items() if k.startswith("ferryman_machine")
                },
            },
            "nginx_upstream_errors": upstream_errors([f.logs() for f in cluster.replicas.values()]),
        }
    )
    return result


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--hook", action="store_true", help="ferryman keeps its machine hooks")
    ap.add_argument("--clients", type=int, default=8, help="concurrent keep-alive clients")
    ap.add_argument("--rate", type=float, default=150, help="requests a second, in all")
    ap.add_argument("--request-delay", type=float, default=0, help="each answer's delay, s")
    ap.add_argument("--health-interval", type=float, default=0.5, help="the balancer's checks, s")
    ap.add_argument("--start-delay", type=float, default=1.0, help="pod load time, seconds")
    ap.add_argument("--probe-period", type=int, default=1, help="readiness probe period")
    ap.add_argument("--term-delay", type=float, default=TERM_DELAY, help="serving after SIGTERM, s")
    ap.add_argument("--grace", type=float, default=3, help="ferryman's --shutdown-grace-period")
    ap.add_argument("--drain-timeout", type=float, default=60, help="--machine-drain-timeout")
    ap.add_argument(
        "--leader", choices=("shared", "machine"), default="shared",
        help="the replica started first (the leader, as a rule)",
    )  # fmt: skip
    ap.add_argument("--settle", type=float, default=3, help="load before and after, s")
    ap.add_argument("--timeout", type=float, default=300, help="bound on the deletion, s")
    ap.add_argument("--out", type=Path, default=Path("bench/results"))
    ap.add_argument("--work", type=Path, help="keep logs and state here (default: a temp dir)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse(argv)
    result = in_work(lambda work: run(args, work), args.work, "fbench-drain-")
    result = {
        **when_and_where(),
        "mode": "hook" if args.hook else "no-hook",
        "load": {
            "clients": args.clients,
            "rate_per_s": args.rate,
            "request_delay_s": args.request_delay,
            "health_check_interval_s": args.health_interval,
        },
        "pods": {
            "deployment_replicas": 4,
            "on_the_machine": 2,
            "start_delay_s": args.start_delay,
            "readiness_probe_period_s": args.probe_period,
            "term_delay_s": args.term_delay,
        },
        **result,
    }
    name = result_name(args.hook, args.term_delay, args.request_delay, args.leader)
    publish(result, table(result), args.out / name)
    return result


if __name__ == "__main__":
    main()
