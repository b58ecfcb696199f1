"""``ferryman completion bash|zsh``: a shell completion script for every
subcommand and flag, printed to be sourced (``source <(ferryman completion bash)``).

shtab writes the script from the argparse parser itself, so completion never
lags behind a new flag; it is a small, dependency-free, maintained library
(iterative/shtab), where argcomplete would run ferryman's Python on every Tab.
"""

from __future__ import annotations

import argparse
from typing import Any

SHELLS = ("bash", "zsh")


def add_parser(sub: argparse._SubParsersAction[Any]) -> None:
    c = sub.add_parser("completion", help="print a shell completion script (source it)")
    c.add_argument("shell", choices=SHELLS)


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    # Imported here: shtab reads its own version through importlib.metadata at
    # import, ~10-20 ms of every command's start (issue 31).
    import shtab

    return shtab.complete(parser, shell=shell)
