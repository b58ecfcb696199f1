"""ferryman's Prometheus text read back as numbers: what the integration
harness and the benchmarks (bench/processes.py) both ask of /metrics."""

from __future__ import annotations

import re

RELOADS = "nginx_ingress_controller_nginx_reloads_total"


def without_class(sample: str) -> str:
    """Drops NIC's constant ``class`` label, so samples read as in a one-class setup."""
    sample = re.sub(r'class="[^"]*",?', "", sample)
    return sample.replace(",}", "}").replace("{}", "")


def parse_metrics(text: str) -> dict[str, float]:
    """Each sample of the exposition ``text`` by its name and labels (without ``class``)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[without_class(name)] = float(value)
    return out


def reload_count(samples: dict[str, float]) -> int:
    """Reloads counted, whatever their reason."""
    return int(
        samples[f'{RELOADS}{{reason="other"}}'] + samples[f'{RELOADS}{{reason="endpoints"}}']
    )
