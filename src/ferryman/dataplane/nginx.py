"""NGINX as a child process: start, test, reload, verify, push endpoints, quit.

A reload is confirmed only when a worker answers the new configuration version
on the version socket: the HUP merely asks the master to try, and a master
that cannot apply a configuration keeps its old workers without telling us.
A master that cannot apply the new configuration (a listener that cannot bind,
a file gone since the test) says so on its error log: that fails the reload at
once instead of at the timeout. Every reload is reported to a ``ReloadObserver``.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import re
import signal
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from ferryman.dataplane import PushResult, unix_http
from ferryman.dataplane.capabilities import pass_on_bind_capability
from ferryman.dataplane.errors import (
    ConfigError,
    ConfigTestError,
    DataPlaneError,
    PushError,
    ReloadError,
)
from ferryman.dataplane.files import atomic_write
from ferryman.dataplane.in_flight import InFlight, parse_peer_counts
from ferryman.dataplane.nginx_messages import (
    bind_failure,
    culprits_in,
    level_of,
    master_failure,
    parse_push_answer,
)
from ferryman.dataplane.reloads import OTHER, ReloadObserver
from ferryman.dataplane.state_dir import Paths, remove_if_stale
from ferryman.observability.metrics import parse_stub_status
from ferryman.wire.push import push_body
from ferryman.wire.records import RecordKey

log = logging.getLogger("ferryman.nginx")
nginx_log = logging.getLogger("ferryman.nginx.errorlog")

# Seconds between version-socket polls: the first soon (a reload takes ~20 ms),
# then less often (Angie's take seconds at thousands of hosts).
_FIRST_POLL = 0.005
_POLL_INTERVAL = 0.02
# NGINX's note that it removed the previous version's socket (``generation_socket``).
_DELETED_VERSION_SOCKET_RE = re.compile(
    r"\[warn\] .*deleting socket \S+/nginx-(config-version|version-odd)\.sock"
)
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


async def unix_get(socket: Path, path: str) -> tuple[int, str]:
    """GET ``path`` from the data plane's server on a unix socket: (status, body)."""
    return await unix_http.request(socket, "GET", path)


# Loaded here, not in the forked child, which must not touch the loader's locks.
_LIBC = ctypes.CDLL(None, use_errno=True)


def _die_with_parent() -> None:
    """In the child before exec: NGINX gets SIGTERM if ferryman dies, even by SIGKILL,
    so no NGINX is ever left without its controller."""
    _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    pass_on_bind_capability()  # ports below 1024 with NIC's pod settings


class NginxManager:
    def __init__(
        self,
        binary: str,
        paths: Paths,
        reload_timeout: float,
        render_version: Callable[[str, int], str],
        reloads: ReloadObserver | None = None,
    ) -> None:
        self._binary = binary
        self._reloads = reloads
        # While a reload waits for its confirmation: the master's [emerg] lines.
        self._reload_errors: list[str] | None = None
        self._unbound: dict[int, str] = {}  # ...and the ports it could not bind
        self._paths = paths
        self._reload_timeout = reload_timeout
        self._render_version = render_version
        self._proc: asyncio.subprocess.Process | None = None
        self._version = 0
        self._push_version = 0
        self._files: dict[str, str] = {}
        self._stderr_task: asyncio.Task[None] | None = None
        # Set while a restarted NGINX runs without public listeners: the main
        # file to reopen them with once the records are back (``restart``).
        self._reopen_main: str | None = None
        # A restart must not interleave with a reload or a push: either would
        # write or signal for the NGINX being replaced.
        self._lock = asyncio.Lock()

    @property
    def listeners_closed(self) -> bool:
        """True while a restarted NGINX waits for its records (``restart``)."""
        return self._reopen_main is not None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def _args(self, *extra: str) -> list[str]:
        return [
            self._binary,
            "-p", str(self._paths.state_dir),
            "-c", str(self._paths.main),
            "-e", "stderr",
            *extra,
        ]  # fmt: skip

    def write(self, files: Mapping[str, str | None]) -> None:
        for rel, text in files.items():
            path = self._paths.state_dir / rel
            if text is None:
                path.unlink(missing_ok=True)
                self._files.pop(rel, None)
            else:
                atomic_write(path, text)
                self._files[rel] = text

    def _write_version(self, version: int) -> None:
        atomic_write(
            self._paths.version_conf,
            self._render_version(str(self._paths.generation_socket(version)), version),
        )

    async def start(self, files: Mapping[str, str | None]) -> None:
        """Write the initial files and start NGINX; returns once it answers.

        ``nginx -t`` runs only when NGINX does not start, for the message that
        names the problem: up front it took ~15 ms of every start-up.
        """
        self.write(files)
        self._write_version(self._version)
        try:
            await self._spawn()
        except ReloadError:
            await self._test()
            raise

    async def _spawn(self) -> None:
        for sock in (
            self._paths.version_socket,
            self._paths.generation_socket(1),
            self._paths.endpoints_socket,
            self._paths.status_socket,
        ):
            sock.unlink(missing_ok=True)  # left by a master that was killed
        self._proc = await asyncio.create_subprocess_exec(
            *self._args("-g", "daemon off;"),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,  # a terminal's ^C reaches ferryman only
            preexec_fn=_die_with_parent,
        )
        self._stderr_task = asyncio.create_task(self._forward_stderr(self._proc))
        await self._wait_version(self._version)
        log.info("nginx started", extra={"fields": {"pid": self._proc.pid}})

    async def restart(self, closed_main: str | None = None) -> None:
        """Start NGINX again with the last good configuration, after it died.

        Workers of a master that was killed keep the listening sockets; they
        share its process group, so the group is killed first.

        The new NGINX's memory is empty: with its listeners open it would answer
        404 for every routed host until the records are pushed again. Given
        ``closed_main`` (the main file without public listeners, as at start-up)
        it starts with that, so clients are refused rather than answered wrongly,
        and the next full push reopens the listeners with the last main file.
        """
        async with self._lock:
            if self._proc is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self._proc.pid, signal.SIGKILL)
                await self.wait_exit()
            if closed_main is not None:
                main = self._main_file()
                if self._reopen_main is None:  # not when an earlier restart failed
                    self._reopen_main = self._files[main]
                self.write({main: closed_main})
            await self._spawn()

    def _main_file(self) -> str:
        return str(self._paths.main.relative_to(self._paths.state_dir))

    async def _reopen_listeners(self) -> None:
        """After a restart, the first full push is in: open the public listeners."""
        assert self._reopen_main is not None
        try:
            await self._apply({self._main_file(): self._reopen_main})
        except ConfigError as e:
            raise PushError(f"records are back, but the listeners did not reopen: {e}") from e
        self._reopen_main = None
        log.info("nginx listeners reopened after the restart")

    async def _forward_stderr(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stderr is not None
        async for raw in proc.stderr:
            line = raw.decode(errors="replace").rstrip()
            level = logging.DEBUG if _DELETED_VERSION_SOCKET_RE.search(line) else level_of(line)
            nginx_log.log(level, line)
            self._watch_reload(proc.pid, line)

    def _watch_reload(self, master: int, line: str) -> None:
        if self._reload_errors is None:
            return
        if master_failure(line, master):
            self._reload_errors.append(line)
        elif (bound := bind_failure(line, master)) is not None:
            self._unbound.setdefault(*bound)

    async def _test(self) -> None:
        proc = await asyncio.create_subprocess_exec(
            *self._args("-t", "-q"),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            preexec_fn=pass_on_bind_capability,  # the test binds the ports too
        )
        out, _ = await proc.communicate()
        if proc.returncode != 0:
            message = out.decode(errors="replace").strip()
            raise ConfigTestError(message, culprits_in(message, self._paths.state_dir))

    async def apply(self, files: Mapping[str, str | None], reason: str = OTHER) -> float:
        """Test, HUP and confirm; returns the seconds that took. ``reason``: what
        caused the reload, for its metrics and log line (``reloads.ENDPOINTS``,
        ``reloads.OTHER``)."""
        async with self._lock:
            return await self._apply(files, reason)

    async def _apply(self, files: Mapping[str, str | None], reason: str = OTHER) -> float:
        started = time.monotonic()
        try:
            self._version = await self._reload(files)
        except (ConfigTestError, ReloadError) as e:
            if self._reloads is not None:
                self._reloads.reload_failed(reason, str(e))
            raise
        seconds = time.monotonic() - started
        if self._reloads is not None:
            self._reloads.reloaded(reason, seconds)
        return seconds

    async def _reload(self, files: Mapping[str, str | None]) -> int:
        if self._proc is None or self._proc.returncode is not None:
            raise ReloadError("nginx is not running")
        before = {rel: self._files.get(rel) for rel in files}
        self.write(files)
        version = self._version + 1
        if (answering := self._paths.generation_socket(version)) != self._paths.generation_socket(
            self._version
        ):
            remove_if_stale(answering)
        self._write_version(version)
        try:
            await self._test()
            self._reload_errors = []
            self._unbound = {}
            self._proc.send_signal(signal.SIGHUP)
            await self._wait_version(version)
        except (ConfigTestError, ReloadError) as e:
            self.write(before)
            self._write_version(self._version)
            if isinstance(e, ReloadError):
                self._remove_stale_sockets()
            raise
        finally:
            self._reload_errors = None
        return version

    def _remove_stale_sockets(self) -> None:
        """A master that failed to load a configuration closes the sockets it
        bound for it without removing their files (a new unix listener, the
        Gateway server's among them): binding them again would fail every
        later reload. Those nothing listens on go."""
        for where in {self._paths.state_dir, self._paths.socket_dir}:
            for path in where.glob("*.sock"):
                remove_if_stale(path)

    async def _wait_version(self, version: int) -> None:
        deadline = time.monotonic() + self._reload_timeout
        want = str(version)
        last = "no answer"
        delay = _FIRST_POLL
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.returncode is not None:
                raise ReloadError(f"nginx exited with code {self._proc.returncode}")
            if self._reload_errors:
                raise ReloadError(
                    "the master kept its old configuration: " + "; ".join(self._reload_errors),
                    self._unbound,
                )
            try:
                answering = self._paths.generation_socket(version)
                last = (await unix_get(answering, "/configVersion"))[1]
                if last == want:
                    return
            except (OSError, TimeoutError) as e:
                last = str(e) or type(e).__name__
            await asyncio.sleep(delay)
            delay = min(delay * 2, _POLL_INTERVAL)
        raise ReloadError(
            f"no worker answered configuration version {version} within "
            f"{self._reload_timeout:g}s (last answer: {last})"
        )

    async def stub_status(self) -> str:
        """NGINX's stub_status text (raises DataPlaneError when NGINX does not answer)."""
        try:
            return (await unix_get(self._paths.status_socket, "/stub_status"))[1]
        except (OSError, TimeoutError) as e:
            raise DataPlaneError(f"stub_status: {e}") from e

    async def fast_path_counts(self) -> tuple[int, int] | None:
        """(proxied, handed over) requests of ngx_http_ferryman_module's fast
        path since NGINX started; None without the module."""
        try:
            status, text = await unix_get(self._paths.endpoints_socket, "/fast-path")
        except (OSError, TimeoutError) as e:
            raise DataPlaneError(f"fast-path counts: {e}") from e
        fields = text.split()
        if status != 200 or len(fields) != 2 or not all(f.isdigit() for f in fields):
            return None
        return int(fields[0]), int(fields[1])

    async def in_flight(self) -> InFlight:
        """Requests in flight now, per peer (ngx_http_ferryman_module's counts,
        ``GET /in-flight``) and through this NGINX (stub_status's ``Writing``).

        NGINX counts a request in Writing from the end of its header
        (ngx_http_process_request: Reading -1, Writing +1) until the request
        is freed (ngx_http_free_request: Writing -1), in whichever worker, old
        ones after a reload included: a keepalive connection between requests
        is Waiting, not Writing; an upgraded (WebSocket) connection stays a
        request until it closes; a response sent on a connection lingering
        for the client's rest (lingering_close) still counts, too high rather
        than too low. stub_status is asked first, so the ``/in-flight``
        request is not in it, and its own request is: minus one.
        """
        try:
            _, status_text = await unix_get(self._paths.status_socket, "/stub_status")
            status, text = await unix_get(self._paths.endpoints_socket, "/in-flight")
        except (OSError, TimeoutError) as e:
            raise DataPlaneError(f"in-flight: {e or type(e).__name__}") from e
        reading = parse_stub_status(status_text)
        if reading is None:
            raise DataPlaneError(f"in-flight: not stub_status: {status_text[:200]!r}")
        replica = max(reading["writing"] - 1, 0)
        if status != 200:  # an nginx.conf from before /in-flight
            return InFlight({}, replica, peers_measured=False)
        try:
            peers = parse_peer_counts(text)
        except ValueError as e:
            raise DataPlaneError(f"in-flight: {e}") from e
        return InFlight(peers or {}, replica, peers_measured=peers is not None)

    async def push(self, records: Mapping[RecordKey, str], full: bool) -> PushResult:
        async with self._lock:
            result = await self._push(records, full)
            if full and self._reopen_main is not None:
                await self._reopen_listeners()
            return result

    async def _push(self, records: Mapping[RecordKey, str], full: bool) -> PushResult:
        version = self._push_version + 1
        body = push_body(version, records, full)
        try:
            status, answer = await unix_http.request(
                self._paths.endpoints_socket, "POST", "/push", body.encode(), timeout=30
            )
        except (OSError, TimeoutError) as e:
            raise PushError(f"push socket: {e}") from e
        result = parse_push_answer(answer) if status == 200 else None
        if result is None or result.version != version:
            raise PushError(f"push refused: {status} {answer[:200].strip()}")
        self._push_version = version
        return result

    async def stop(self, timeout: float = 30.0) -> None:
        """Graceful quit (SIGQUIT lets workers finish their requests)."""
        proc = self._proc
        if proc is None:
            return
        if proc.returncode is not None:
            # The master is already gone; its workers may not be (they keep serving).
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            return
        proc.send_signal(signal.SIGQUIT)
        try:
            await asyncio.wait_for(proc.wait(), timeout)
        except TimeoutError:
            log.warning("nginx did not quit in time; killing it")
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
        if self._stderr_task is not None:
            with contextlib.suppress(asyncio.CancelledError, DataPlaneError):
                await self._stderr_task
        log.info("nginx stopped", extra={"fields": {"code": proc.returncode}})

    async def wait_exit(self) -> int:
        """Returns NGINX's exit code when the master dies (or is stopped).

        Not ``Process.wait()``: it also waits for the stderr pipe to close, and
        the workers of a killed master keep it open.
        """
        assert self._proc is not None
        while self._proc.returncode is None:  # noqa: ASYNC110 - set by the child watcher, no event
            await asyncio.sleep(0.1)
        return self._proc.returncode
