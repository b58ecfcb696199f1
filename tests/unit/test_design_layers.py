"""docs/design.md's layer drawing is the one import-linter checks: the
``Layers`` contract in pyproject.toml, read layer by layer."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _drawn() -> list[set[str]]:
    section = (ROOT / "docs" / "design.md").read_text().partition("\n## Layers\n")[2]
    chain = re.search(r"`(app\.cli >.*?)`", section, re.S)
    assert chain is not None, "docs/design.md's Layers section draws no chain"
    layers = []
    for layer in " ".join(chain.group(1).split()).split(" > "):
        names = layer.strip("{}").split(", ")
        layers.append({f"ferryman.{n.strip()}" for n in names})
    return layers


def _checked() -> list[set[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["name"] == "Layers")["layers"]
    return [{n.strip() for n in layer.split("|")} for layer in layers]


def test_the_drawn_layers_are_the_checked_ones() -> None:
    assert _drawn() == _checked()


def test_the_worker_names_no_registered_kind() -> None:
    """The worker (engine/controller.py) takes its kinds from the registry: no
    kind's name, code or comment, is written in it (import-linter sees only
    imports; a string like "Ingress" would not be caught there)."""
    from ferryman.kinds import REGISTRY

    text = (ROOT / "src" / "ferryman" / "engine" / "controller.py").read_text()
    words = set(re.findall(r"[A-Za-z]+", text))
    named = {w for spec in REGISTRY for w in (spec.kind, spec.kind + "s", spec.kind + "es")}
    assert not named & words
