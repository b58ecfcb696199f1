"""Half of a long piece of work done by a forked child, at the same time.

The first load of a large manifests directory is CPU work in one Python
process (~2.5 s of YAML at 10,000 Ingresses) while the second core idles. A
child made with ``fork`` starts with every module already imported (a
``spawn`` or ``forkserver`` pool imported PyYAML and ferryman anew, and took
longer than one process on two busy cores), does its half and writes the
result as bytes to a pipe, then ends without cleaning up (``os._exit``: the
parent's resources are the parent's to close).

A child that fails, or cannot be made, yields None: the caller does that half
itself, as it would have without a child.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable


class Child:
    def __init__(self, pid: int, read_fd: int) -> None:
        self._pid = pid
        self._read_fd = read_fd

    def result(self) -> bytes | None:
        """Wait for the child: what it wrote, or None when it failed."""
        try:
            with os.fdopen(self._read_fd, "rb") as pipe:
                data = pipe.read()
        finally:
            _, status = os.waitpid(self._pid, 0)
        return data if os.waitstatus_to_exitcode(status) == 0 else None

    def kill(self) -> None:
        """End it now (its result is then None, at once)."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self._pid, signal.SIGKILL)


def fork(work: Callable[[], bytes]) -> Child | None:
    """Run ``work`` in a forked child; None when no child could be made.

    Call from the main thread: the child resets the signals the parent handles
    (a Ctrl-C to the process group must not reach the parent's handlers twice,
    through the wakeup descriptor they share)."""
    try:
        read_fd, write_fd = os.pipe()
    except OSError:
        return None
    try:
        pid = os.fork()
    except OSError:
        os.close(read_fd)
        os.close(write_fd)
        return None
    if pid == 0:  # the child
        code = 1
        try:
            os.close(read_fd)
            signal.set_wakeup_fd(-1)
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, signal.SIG_DFL)
            data = work()
            with os.fdopen(write_fd, "wb") as pipe:
                pipe.write(data)
            code = 0
        finally:
            os._exit(code)
    os.close(write_fd)
    return Child(pid, read_fd)
