"""Seconds from ``ferryman run`` to the first 200 of /nginx-ready, with the
bytecode as the installation has it (nothing compiled here, unlike the other
benches): what every pod start and every test pays.

    .venv/bin/python -m bench.cold_start [--ingresses 100] [--starts 5]

Prints one JSON line: the median, min and max over ``--starts`` starts in
manifests mode with ``--ingresses`` Ingresses (/nginx-ready asked every 10 ms, as
issue 31 measured), and how many of ferryman's and its libraries' modules have
bytecode (``scripts/setup.sh`` compiles them; where PYTHONDONTWRITEBYTECODE is
set, Python reads .pyc files but never writes them).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import sysconfig
import tempfile
from pathlib import Path

from bench.processes import ROOT, Ferryman, ingress_docs, write_yaml


def _bytecode_share() -> str:
    """``compiled/modules`` over src/ and the virtualenv's site-packages."""
    sources = compiled = 0
    for d in (ROOT / "src", Path(sysconfig.get_paths()["purelib"])):
        for py in d.rglob("*.py"):
            sources += 1
            tag = sys.implementation.cache_tag
            compiled += (py.parent / "__pycache__" / f"{py.stem}.{tag}.pyc").exists()
    return f"{compiled}/{sources}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--ingresses", type=int, default=100)
    ap.add_argument("--starts", type=int, default=5)
    args = ap.parse_args()
    seconds = []
    with tempfile.TemporaryDirectory(prefix="fcold-", dir="/tmp") as tmp:
        for start in range(args.starts):
            f = Ferryman(Path(tmp) / f"s{start}")
            for i in range(args.ingresses):
                write_yaml(f.manifests / f"app{i}.yaml", ingress_docs(i, (1, 2)))
            try:
                seconds.append(f.start(poll=0.01))
            finally:
                f.stop()
    print(
        json.dumps(
            {
                "ingresses": args.ingresses,
                "starts": args.starts,
                "ready_s_median": round(statistics.median(seconds), 3),
                "ready_s_min": round(min(seconds), 3),
                "ready_s_max": round(max(seconds), 3),
                "bytecode": _bytecode_share(),
            }
        )
    )


if __name__ == "__main__":
    main()
