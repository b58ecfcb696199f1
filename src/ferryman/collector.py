"""Python's cyclic garbage collector, paused while ferryman starts.

Start-up builds everything the store and the configuration keep, and far
more that it drops at once (libyaml's nodes, the parsers' intermediate maps):
at 10,000 Ingresses millions of objects, nearly all of them freed by their
reference counts. The collector runs after every 700 new objects and, as the
survivors pile up, scans more of them each time: it took ~1.5 s of the ~6 s of
CPU to ready there, and found ~2,000 objects in cycles.

So it is paused from the start until the first drain is done. What start-up
kept is then frozen (``gc.freeze``: left out of every later collection) rather
than collected: a full collection of it took 0.25 s, on the event loop, right
when readiness is first answered, and every later full one would scan it all
again (it stays: the store, the configuration). The price: those few
thousand objects of start-up cycles are never freed, nor is a cycle of
objects made during start-up that becomes garbage later (what is freed by
reference counts, nearly everything, still is).
"""

from __future__ import annotations

import gc
from collections.abc import Callable


def pause() -> Callable[[], None]:
    """Pause the collector (when it runs); returns what resumes it, once, after
    freezing what exists then."""
    if not gc.isenabled():
        return lambda: None
    gc.disable()
    resumed = False

    def resume() -> None:
        nonlocal resumed
        if not resumed:
            resumed = True
            gc.freeze()
            gc.enable()

    return resume
