"""Python's cyclic garbage collector, paused while ferryman starts.

Start-up builds everything the store and the configuration keep, and far
more that it drops at once (libyaml's nodes, the parsers' intermediate maps):
at 10,000 Ingresses millions of objects, nearly all of them freed by their
reference counts. The collector runs after every 700 new objects and, as the
survivors pile up, scans more of them each time: it took ~1.5 s of the ~6 s of
CPU to ready there, and found ~2,000 objects in cycles. Importing ferryman and
its libraries alone ran it 127 times, ~40 ms of a ~0.25 s import.

So the command pauses it before it imports anything (``ferryman.app.launch``), and
``run`` resumes it once the first drain is done (other commands at once). What
exists then is frozen (``gc.freeze``: left out of every later collection)
rather than collected: a full collection of it took 0.25 s at 10,000
Ingresses, on the event loop, right when readiness is first answered, and
every later full one would scan it all again (it stays: the store, the
configuration). The price: those few thousand objects of start-up cycles are
never freed, nor is a cycle of objects made during start-up that becomes
garbage later (what is freed by reference counts, nearly everything, still is).

The collector is one per process, and so is this pause.
"""

from __future__ import annotations

import gc

_paused = False


def pause() -> None:
    """Pause the collector, unless it is off (or paused already)."""
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def resume() -> None:
    """Resume what ``pause`` paused, after freezing what exists; else nothing."""
    global _paused
    if _paused:
        _paused = False
        gc.freeze()
        gc.enable()
