"""When a Lease's holder counts as alive: pure, so the gates' core reads it too."""

from __future__ import annotations

# Seconds a replica's clock may run ahead of the leader's: NTP keeps nodes well
# within it; a replica further ahead counts as not reporting (its gates open
# without it, as if it had died), which fails open rather than shut.
CLOCK_SKEW = 5.0


def alive(renewed: float, duration: float, now: float) -> bool:
    """Renewed (seconds since the epoch) within ``duration`` of ``now``, and not
    beyond ``CLOCK_SKEW`` ahead of it."""
    return renewed <= now + CLOCK_SKEW and renewed + duration > now
