"""The ``ferryman`` command's entry point: the garbage collector is paused
before anything else is imported (``collector``), then ``cli`` runs."""

from __future__ import annotations

from ferryman.observability import collector


def main() -> int:
    collector.pause()
    from ferryman.app import cli

    return cli.main()
