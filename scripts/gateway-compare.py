"""README's Gateway API comparison: ferryman's conformance report beside NGINX
Gateway Fabric's and Envoy Gateway's published ones, feature by feature.

    .venv/bin/python scripts/gateway-compare.py            # print the Markdown table
    .venv/bin/python scripts/gateway-compare.py --write    # into README.md
    .venv/bin/python scripts/gateway-compare.py OURS A B    # other reports

README.md holds the table between ``<!-- generated: gateway-compare -->`` and
``<!-- end: gateway-compare -->``; tests/unit/test_gateway_compare.py checks
that its ferryman column is what docs/gateway-conformance/report.yaml says.

The published reports are those the gateway-api release ships under
``conformance/reports/`` (the Go module the conformance tool builds from, so
they are in the module cache after ``tools/conformance/build.sh``); each
feature's channel is read from the same release's ``pkg/features``. A feature
counts as passed where a profile's extended tests claim it and none failed
(a report may skip tests: its counts say how many ran).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
OURS = ROOT / "docs/gateway-conformance/report.yaml"
VERSION = "v1.6.3"
PUBLISHED = (
    "v1.5/nginx-nginx-gateway-fabric/experimental-2.6.0-default-report.yaml",
    "v1.5/envoy-gateway/experimental-v1.8.0-default-report.yaml",
)
PROFILES = ("GATEWAY-HTTP", "GATEWAY-TLS", "GATEWAY-GRPC")
_FEATURE = re.compile(r"Name:\s+Support(\w+),\s*\n\s*Channel:\s+FeatureChannel(\w+)")


def _module_cache() -> Path:
    out = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True, check=True)
    return Path(out.stdout.strip()) / "sigs.k8s.io"


def _channels(cache: Path) -> dict[str, str]:
    features = cache / f"gateway-api@{VERSION}" / "pkg" / "features"
    out: dict[str, str] = {}
    for source in sorted(features.glob("*.go")):
        for name, channel in _FEATURE.findall(source.read_text()):
            out[name] = channel
    return out


def _passed(report: dict[str, Any]) -> set[str]:
    out: set[str] = set()
    for profile in report.get("profiles") or []:
        extended = profile.get("extended") or {}
        if int((extended.get("statistics") or {}).get("Failed", 0)) == 0:
            out.update(extended.get("supportedFeatures") or [])
    return out


def _listed(report: dict[str, Any]) -> set[str]:
    """Every feature a report's profiles name, claimed or not."""
    out: set[str] = set()
    for profile in report.get("profiles") or []:
        extended = profile.get("extended") or {}
        out.update(extended.get("supportedFeatures") or [])
        out.update(extended.get("unsupportedFeatures") or [])
    return out


def _counts(report: dict[str, Any], name: str, part: str) -> str:
    for profile in report.get("profiles") or []:
        if profile.get("name") == name:
            stats = (profile.get(part) or {}).get("statistics") or {}
            total = sum(int(stats.get(k, 0)) for k in ("Passed", "Failed", "Skipped"))
            return f"{stats.get('Passed', 0)}/{total}" if total else "-"
    return "not run"


def _title(report: dict[str, Any], fallback: str) -> str:
    impl = report.get("implementation") or {}
    names = {"nginx-gateway-fabric": "NGINX Gateway Fabric", "envoy-gateway": "Envoy Gateway"}
    project = names.get(str(impl.get("project")), str(impl.get("project") or fallback))
    version = str(impl.get("version", ""))
    if project == "ferryman":
        version = ""  # a commit: the report says which
    suite = report.get("gatewayAPIVersion", "?")
    return f"{project} {version}".strip() + f" (suite {suite})"


def table(reports: list[dict[str, Any]], channels: dict[str, str]) -> str:
    passed = [_passed(r) for r in reports]
    features = sorted(set().union(*(_listed(r) for r in reports)))
    head = ["feature", *(_title(r, str(i)) for i, r in enumerate(reports))]
    rows = [head, ["---"] * len(head)]
    for name in PROFILES:
        for part in ("core", "extended"):
            rows.append([f"{name} {part} tests", *(_counts(r, name, part) for r in reports)])
    for feature in features:
        if feature in {"Gateway", "HTTPRoute", "GRPCRoute", "TLSRoute", "ReferenceGrant"}:
            continue  # the profiles' core, counted above
        channel = channels.get(feature, "?")
        label = feature if channel == "Standard" else f"{feature} (experimental)"
        rows.append([label, *("✓" if feature in p else "-" for p in passed)])
    return "\n".join("| " + " | ".join(row) + " |" for row in rows) + "\n"


README = ROOT / "README.md"
BEGIN, END = "<!-- generated: gateway-compare -->\n", "<!-- end: gateway-compare -->\n"


def main(argv: list[str]) -> int:
    write = "--write" in argv
    argv = [a for a in argv if a != "--write"]
    cache = _module_cache()
    reports_dir = cache / f"gateway-api/conformance@{VERSION}" / "reports"
    paths = [Path(p) for p in argv] or [OURS, *(reports_dir / p for p in PUBLISHED)]
    reports = [yaml.safe_load(p.read_text()) for p in paths]
    text = table(reports, _channels(cache))
    if not write:
        sys.stdout.write(text)
        return 0
    readme = README.read_text()
    start, end = readme.index(BEGIN) + len(BEGIN), readme.index(END)
    README.write_text(readme[:start] + text + readme[end:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
