#!/usr/bin/env python3
"""Write the CRDs of NIC's VirtualServer, VirtualServerRoute, Policy, TransportServer
and GlobalConfiguration.

Usage: .venv/bin/python scripts/nic-crds.py
Writes deploy/crds/k8s.nginx.org_*.yaml and charts/ferryman/crds/ from the
kinds' specs (src/ferryman/kinds/*/spec.py, whose schemas are in
src/ferryman/resources/nic_crds.py); tests/unit/test_nic_crds.py fails when
the committed files differ from what this writes.
"""

from __future__ import annotations

from pathlib import Path

from ferryman import kinds

ROOT = Path(__file__).resolve().parents[1]
TARGETS = (ROOT / "deploy" / "crds", ROOT / "charts" / "ferryman" / "crds")


def main() -> None:
    for target in TARGETS:
        target.mkdir(parents=True, exist_ok=True)
        for name, text in kinds.crd_files().items():
            (target / name).write_text(text)
            print(target.relative_to(ROOT) / name)


if __name__ == "__main__":
    main()
