"""``ferryman completion bash``: a script bash accepts that completes the
subcommands and each subcommand's flags, from the parser itself."""

from __future__ import annotations

import functools
import subprocess
import sys

import pytest

COMPLETE = r"""
source /dev/stdin
COMP_WORDS=({words})
COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))
COMP_LINE="${{COMP_WORDS[*]}}"
COMP_POINT=${{#COMP_LINE}}
_shtab_ferryman
printf '%s\n' "${{COMPREPLY[@]}}"
"""


@functools.cache  # one ferryman start per shell, not one per completion asked
def _script(shell: str) -> str:
    return subprocess.run(
        [sys.executable, "-m", "ferryman.app.cli", "completion", shell],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout


def _complete(words: str) -> list[str]:
    out = subprocess.run(
        ["bash", "-c", COMPLETE.format(words=words)],
        input=_script("bash"),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return out.stdout.split()


def test_bash_completes_subcommands_and_their_flags() -> None:
    assert {"run", "render", "migrate", "machine-controller", "completion"} <= set(
        _complete("ferryman ''")
    )
    assert "--ingress-class" in _complete("ferryman run --ingress-cl")
    assert "--disable-ipv6" in _complete("ferryman run --disable-")
    assert "--output" in _complete("ferryman render --out")
    assert "--output-dir" in _complete("ferryman migrate --output-")


@pytest.mark.parametrize("shell", ["zsh"])
def test_other_shells_get_a_script(shell: str) -> None:
    assert "--ingress-class" in _script(shell)
