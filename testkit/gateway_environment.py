"""What the Gateway API conformance suite needs besides ferryman: its binaries
(tools/conformance/build.sh: the suite, echo-basic and the release's CRDs) and
pods that serve as the suite's images do (the test kubelet runs echo-basic for
``gateway-api/echo-basic`` images and an idle process for any other image).
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testkit.kubelet import Command

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Conformance:
    suite: Path
    echo_basic: Path
    crds: Path

    def command(self) -> Command:
        """The test kubelet's command for a pod of the suite's manifests."""

        def run(pod: dict[str, Any], ip: str, ports: list[int]) -> list[str]:
            image = pod["spec"]["containers"][0].get("image", "")
            binary = str(self.echo_basic) if "/gateway-api/echo-basic:" in image else "-"
            return [sys.executable, "-m", "testkit.echo_pod", binary, ip, *map(str, ports)]

        return run

    def crd_files(self) -> list[Path]:
        """The standard channel's CRDs (not its ValidatingAdmissionPolicy, which
        only guards upgrades from older CRDs)."""
        return sorted(p for p in self.crds.glob("gateway.networking.k8s.io_*.yaml")
                      if "_vap_" not in p.name)  # fmt: skip


def build() -> Conformance:
    out = subprocess.run(
        [str(ROOT / "tools" / "conformance" / "build.sh")],
        check=True, capture_output=True, text=True,
    ).stdout.split()  # fmt: skip
    return Conformance(Path(out[-3]), Path(out[-2]), Path(out[-1]))
