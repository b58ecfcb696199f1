"""The composition root: builds every part, wires them, runs them, stops them."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ferryman.app.kubernetes_mode import KubernetesMode
from ferryman.app.kubernetes_mode import webhook as readiness_gate_webhook
from ferryman.app.lifecycle import Lifecycle
from ferryman.app.wiring import BUILT_IN, Kinds, prepared, shape
from ferryman.dataplane import ipv6
from ferryman.dataplane.errors import DataPlaneError
from ferryman.dataplane.fallback import begin_fallback_certificate
from ferryman.dataplane.keep_alive import keep_nginx_alive
from ferryman.dataplane.main_file import (
    FAST_MODULE,
    MainFile,
    checked_path,
    checked_paths,
    main_config,
)
from ferryman.dataplane.nginx import NginxManager
from ferryman.dataplane.reloads import ReloadLog
from ferryman.dataplane.state_dir import (
    Paths,
    own_state_dir,
    remove_short_socket_dir,
)
from ferryman.dataplane.worker_user import traversable_by_others, worker_gid, worker_user
from ferryman.engine.controller import Controller
from ferryman.engine.following import Following
from ferryman.engine.kind_spec import ready_counts
from ferryman.engine.queue_keys import QueueKey
from ferryman.engine.secrets import SecretStore
from ferryman.engine.settings import Settings, SettingsError
from ferryman.engine.sink import QueueingSink
from ferryman.engine.store import Store
from ferryman.engine.workqueue import WorkQueue
from ferryman.observability import collector
from ferryman.observability.latency import LatencyReceiver
from ferryman.observability.metrics import Metrics, parse_stub_status
from ferryman.observability.probes import ProbeServer
from ferryman.report import LogReporter, Reporter
from ferryman.translators.context import Sinks

if TYPE_CHECKING:
    from ferryman.sources.manifests import ManifestsSource

log = logging.getLogger("ferryman")


async def _first_done(tasks: set[asyncio.Task[Any]]) -> set[asyncio.Task[Any]]:
    done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    return done


def _bind_webhook(port: int, ipv6: bool) -> list[socket.socket]:
    """The readiness gate webhook's port, bound before NGINX's public listeners
    open: it serves only once the caches are whole, but no listener a resource
    asks for may take its port meanwhile (and crash-loop every replica). On
    IPv6 too with ``ipv6`` (the API server calls the pod's address)."""
    families = [(socket.AF_INET, "0.0.0.0")]
    if ipv6:
        families.append((socket.AF_INET6, "::"))
    socks: list[socket.socket] = []
    for family, address in families:
        sock = socket.socket(family, socket.SOCK_STREAM)
        socks.append(sock)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:  # beside the IPv4 socket, as NGINX's
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind((address, port))
            sock.listen(128)
        except OSError as e:
            for s in socks:
                s.close()
            raise SettingsError(f"--readiness-gate-webhook-port {port}: {e}") from e
        sock.setblocking(False)
    return socks


def _log_problem(where: str, message: str) -> None:
    log.error("manifest rejected", extra={"fields": {"file": where, "reason": message}})


def _checked_state_dir(state_dir: Path) -> Path:
    return checked_path("--state-dir", state_dir)


async def _grace_period(seconds: float, hurry: asyncio.Event) -> None:
    """Keep serving (and applying changes) while load balancers stop sending here.

    ``/nginx-ready`` already answers 503, but a Service's endpoints, kube-proxy's
    rules and cloud load balancers learn that seconds later; closing the listeners
    now (NGINX's graceful quit does at once) would refuse what they still send.
    """
    if seconds <= 0:
        return
    log.info(
        "shutting down: still serving for the grace period", extra={"fields": {"seconds": seconds}}
    )
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(hurry.wait(), seconds)
    if hurry.is_set():
        log.warning("signalled again: grace period cut short")


async def _abandon(nginx: NginxManager, starting: asyncio.Task[None]) -> None:
    """Start-up failed after NGINX was started: it goes too."""
    with contextlib.suppress(Exception):
        await starting
    await nginx.stop()


async def run(settings: Settings, kinds: Kinds = BUILT_IN) -> int:
    collector.pause()  # unless ferryman.app.launch did already
    try:
        user, uid = worker_user()
        state_dir = own_state_dir(_checked_state_dir(settings.state_dir))
        paths = prepared(checked_paths(state_dir), uid)
        try:
            return await _run(settings, paths, user, uid, kinds)
        finally:
            remove_short_socket_dir(paths)
    finally:
        collector.resume()


def _listen_families(settings: Settings) -> Settings:
    """``settings`` with --disable-ipv6 set when the machine has no IPv6: NGINX
    could not bind ``[::]`` and would serve nothing, so IPv4 serves alone."""
    if settings.listen.disable_ipv6:
        return settings
    why = ipv6.unavailable()
    if not why:
        return settings
    log.warning(
        "IPv6 is not available here: listening on IPv4 only, as with --disable-ipv6",
        extra={"fields": {"reason": why}},
    )
    return replace(settings, listen=replace(settings.listen, disable_ipv6=True))


async def _run(
    settings: Settings,
    paths: Paths,
    user: str | None,
    uid: int | None,
    kinds: Kinds,
) -> int:
    began = time.monotonic()
    settings = _listen_families(settings)
    main = MainFile(settings, paths)
    if uid is not None and not traversable_by_others(paths.state_dir):
        log.warning(
            "NGINX workers run as nobody and cannot reach --state-dir: proxy buffering "
            "to disk, latency metrics and TLS passthrough's hop to HTTPS will fail, and "
            "Gateway HTTP listeners take no GRPCRoute where only the h2c hop serves h2c; "
            "make its parents world-executable",
            extra={"fields": {"state_dir": str(paths.state_dir)}},
        )
    # Made while NGINX starts and the sources list: only the public listeners need it.
    fallback_made = begin_fallback_certificate(paths.fallback_certificate)
    metrics = Metrics(settings.ingress_class)
    queue: WorkQueue[QueueKey] = WorkQueue(
        on_depth=metrics.workqueue_depth.set, on_wait=metrics.queue_seconds.observe
    )
    store = Store(kinds.specs)
    nginx = NginxManager(
        settings.nginx.binary,
        paths,
        settings.nginx.reload_timeout,
        main.config_version,
        ReloadLog(metrics),
    )
    bootstrap_main = main.main(user, public=False)
    bootstrap = {main.name: bootstrap_main}
    fast = main_config(settings, main.paths, user, public=False).fast_module
    log.info(
        "fast path",
        extra={
            "fields": {
                "runs_in": "ngx_http_ferryman_module" if fast else "lua",
                "module": str(settings.nginx.modules_dir / FAST_MODULE),
            }
        },
    )
    # NGINX boots (its own process, on the other core) while the rest is set up
    # and the sources read everything the first time: its start is then off the
    # way to ready. One step of the task spawns it.
    starting = asyncio.create_task(nginx.start(bootstrap), name="nginx start")
    await asyncio.sleep(0)
    webhook_sockets: list[socket.socket] = []
    try:
        cluster = (
            KubernetesMode(settings, store, queue, metrics, kinds.specs)
            if settings.manifests is None
            else None
        )
        if cluster is not None and settings.gates.webhook_port:
            webhook_sockets = _bind_webhook(
                settings.gates.webhook_port, not settings.listen.disable_ipv6
            )
    except BaseException:
        await _abandon(nginx, starting)
        raise
    reporter: Reporter = cluster.reporter if cluster else LogReporter()
    status = cluster.reporter.status if cluster and settings.kubernetes.report_status else None
    sinks = Sinks(
        ingress=status,
        gateway=(
            cluster.reporter.gateway_api_status if cluster else LogReporter().gateway_api_status
        ),
    )
    controller = Controller(
        settings, store, queue, nginx, SecretStore(), reporter, metrics, bootstrap,
        kinds, shape=shape(main, user), sinks=sinks,
        observers=(cluster,) if cluster else (),
        resource_status=cluster.reporter.resource_status if cluster else None,
        configmap=main.configmap(user),
    )  # fmt: skip
    # Ready once the public configuration (the listeners) is live: a start-up
    # reload that failed keeps it false until a retry succeeds. (The ConfigMap
    # renders it otherwise: anything but the bootstrap is public.)
    public = main.main(user, public=True)
    started = False

    def ready() -> bool:
        applied = controller.applied_file(main.name)
        return started and applied is not None and applied != bootstrap_main

    # stub_status's, and the fast path's own.
    async def counters() -> dict[str, int] | None:
        reading = parse_stub_status(await nginx.stub_status())
        fast = await nginx.fast_path_counts()
        if reading is not None and fast is not None:
            reading["fast_path_proxied"], reading["fast_path_handed_over"] = fast
        return reading

    async def in_flight_reading() -> tuple[Mapping[str, int], int, bool]:
        reading = await nginx.in_flight()
        return reading.peers, reading.replica, reading.peers_measured

    following: Following | None = None
    probes = ProbeServer(
        settings.listen.ready_port,
        settings.listen.metrics_port,
        metrics,
        # Not while a restarted NGINX waits for its records with its listeners
        # closed, nor once asked to stop (the grace period's first step), nor
        # while this replica's Node is being drained (machine lifecycle hooks).
        lambda: (
            ready()
            and not stop.is_set()
            and not nginx.listeners_closed
            and not (cluster is not None and cluster.node_leaving())
            # Nor while behind the API after a stall or an outage (engine/following.py).
            and (following is None or following.ready())
        ),
        counters,
        in_flight_reading,
        ipv6=not settings.listen.disable_ipv6,
    )
    stop = asyncio.Event()  # signalled: readiness fails, the grace period begins
    hurry = asyncio.Event()  # a second signal: the grace period ends now
    # The sources watch on through the grace period: backends roll meanwhile too.
    unwatch = asyncio.Event()
    try:
        await probes.start()
    except BaseException:
        await _abandon(nginx, starting)
        raise

    def on_signal() -> None:
        if stop.is_set():
            hurry.set()
        stop.set()

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)

    code = 0
    life = Lifecycle()
    life.on_stop("nginx", nginx.stop)
    if webhook_sockets:
        life.on_stop("webhook socket", _closer(*webhook_sockets))
    life.on_stop("probes", probes.stop)
    try:
        if settings.nginx.latency_metrics:
            receiver = LatencyReceiver(
                paths.latency_socket,
                metrics,
                controller.latency_owner,
                pod_of=controller.latency_pod,
            )
            receiver.bind(worker_gid())
            life.run("latency", receiver.run())
        manifests: ManifestsSource | None = None
        if cluster is not None:
            life.run("informers", cluster.source.run(unwatch))
            first = asyncio.create_task(cluster.source.wait_synced(), name="synced")
        else:
            assert settings.manifests is not None
            # Here, not at the top: PyYAML is manifests mode's alone.
            from ferryman.sources.manifests import ManifestsSource

            manifests = ManifestsSource(
                settings.manifests, QueueingSink(store, queue), _log_problem, kinds.specs
            )
            first = asyncio.create_task(manifests.load_in_thread(), name="first load")
        await asyncio.wait({starting, first}, return_when=asyncio.FIRST_EXCEPTION)
        try:
            await starting
        except BaseException as e:
            first.cancel()
            if not isinstance(e, DataPlaneError):
                raise
            log.error("nginx failed to start", extra={"fields": {"error": str(e)}})
            return 1
        metrics.workers.master_pid = lambda: nginx.pid
        await first
        # client-go's "caches are synced": where a slow start's time went
        # (the lists, or the first drain after them).
        log.info(
            "listed",
            extra={
                "fields": {"objects": store.total(), "seconds": round(time.monotonic() - began, 3)}
            },
        )
        if manifests is not None:
            life.run("manifests", manifests.run(unwatch))
        fallback_made()
        # The listeners open with the first reload, after the whole initial state
        # has been pushed: no request is answered from a half-loaded state.
        controller.set_file(main.name, public)
        await controller.drain()
        started = True
        collector.resume()
        # Asked to stop while starting: never reported ready, so nothing sends here.
        served = not stop.is_set()
        if ready():
            counts = ready_counts(kinds.specs, settings, store.count, controller.skipped_counts())
            log.info("ready", extra={"fields": counts})
        else:
            log.error("not ready: the public configuration is not live; it is retried")
        if cluster is not None:
            following = cluster.following(controller)
            life.run("following", following.run())
            life.adopt(cluster.tasks(stop, controller, nginx.in_flight))
            if settings.gates.webhook_port:  # once the caches are whole
                webhook = readiness_gate_webhook(
                    settings, cluster, store, controller, metrics, webhook_sockets
                )
                life.run("readiness-gate-webhook", webhook.run())
        life.run("controller", controller.run())
        life.run(
            "nginx", keep_nginx_alive(nginx, controller.resend_everything, metrics, bootstrap_main)
        )
        stopper = asyncio.create_task(stop.wait(), name="stop")
        pending: set[asyncio.Task[Any]] = {*life.tasks, stopper}
        if stopper not in (done := await _first_done(pending)):
            # Every task runs until ferryman stops: one that ended failed.
            for t in done:
                log.error("task ended unexpectedly", extra={"fields": {"task": t.get_name()}})
                with contextlib.suppress(asyncio.CancelledError):
                    if (exc := t.exception()) is not None:
                        log.error("task failed", exc_info=exc)
            code = 1
        stop.set()
        stopper.cancel()
        if code == 0 and served:
            await _grace_period(settings.drain.grace_period, hurry)
    finally:
        started = False
        unwatch.set()
        await life.stop()  # in app/lifecycle.py's STOP_ORDER
    log.info("stopped", extra={"fields": {"code": code}})
    if life.abandoned:
        # Closing the loop, asyncio.run would cancel them and wait again, for
        # ever: NGINX has stopped and every step is done, so the process ends here.
        logging.shutdown()
        sys.stdout.flush()
        os._exit(code)
    return code


def _closer(*socks: socket.socket) -> Callable[[], Awaitable[None]]:
    async def close() -> None:
        for sock in socks:
            sock.close()

    return close
