"""Running the Gateway API conformance suite against ferryman, and reading its report.

The suite (tools/conformance/build.sh) is a Go test binary: it talks to the API
server through ``KUBECONFIG``, needs the GatewayClass to exist, applies its
base manifests (13 Deployments become 23 pods through the test cluster's
controllers and test kubelet), then runs each test: applies its manifests,
waits for statuses and sends requests to each Gateway's status address on the
listener's port. Everything it dials is on loopback: the API server and the
Gateways' addresses (``--gateway-addresses`` 127.0.0.x).

``run_suite`` runs it with the GATEWAY-HTTP, GATEWAY-TLS and GATEWAY-GRPC profiles and the
report's implementation block; ``Results`` reads the ConformanceReport YAML it writes
and, from the ``go test -v`` log, each failed test's own lines.
"""

from __future__ import annotations

import ipaddress
import os
import re
import subprocess
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ferryman.app.flag_types import address_pool

ROOT = Path(__file__).resolve().parents[1]

GATEWAY_CLASS = "ferryman"
CONTROLLER_NAME = "ferryman.io/gateway-controller"
PROFILE = "GATEWAY-HTTP"
# The profiles ferryman runs, and each one's core tests in v1.6.3
# (notes/gateway-conformance.md §6; GATEWAY-TLS's counts the Gateway tests it
# shares with GATEWAY-HTTP, GATEWAY-GRPC's too: 10 and 4 GRPCRoute core tests).
PROFILES = {"GATEWAY-HTTP": 36, "GATEWAY-TLS": 19, "GATEWAY-GRPC": 14}
# The profiles' core features; the suite is told those ferryman claims (its
# GatewayClass's supportedFeatures), extended ones included.
FEATURES = ("Gateway", "HTTPRoute", "ReferenceGrant", "TLSRoute", "GRPCRoute")
# Addresses Gateways take one each (the suite dials a Gateway's first status
# address on its listeners' ports 80, 443, 8080): loopback, so nothing leaves
# the machine; away from 127.0.0.1, where other tests listen.
GATEWAY_ADDRESSES = os.environ.get("FERRYMAN_GATEWAY_ADDRESSES", "127.0.0.100-127.0.0.199")
# The suite's waits, shortened where ferryman answers in seconds (defaults:
# utils/config/timeout.go): a stuck run fails sooner. The pods' readiness is the
# test kubelet's (23 echo-basic processes on a 2-core machine).
TIMEOUTS = "GWCMustBeAccepted:60;NamespacesMustBeReady:300"
# GatewayStaticAddresses asks for one address ferryman can use (the pool's last,
# which lowest-free assignment reaches last) and one it cannot (just outside it).
_POOL = address_pool(GATEWAY_ADDRESSES)
USABLE_ADDRESS = _POOL[-1]
UNUSABLE_ADDRESS = str(ipaddress.IPv4Address(_POOL[0]) - 1)


@dataclass(frozen=True)
class Implementation:
    """The report's ``implementation`` block (every field is required by the suite)."""

    organization: str = "ferryman"
    project: str = "ferryman"
    url: str = os.environ.get("FERRYMAN_CONFORMANCE_URL", "https://ferryman.io/")
    version: str = ""  # a commit, never a branch (the upstream rules for reports)
    contact: str = os.environ.get("FERRYMAN_CONFORMANCE_CONTACT", "ferryman maintainers")


def commit() -> str:
    """HEAD's commit, with ``-dirty`` when the work tree has changes."""
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=ROOT, capture_output=True, text=True, check=False,
    ).stdout.strip()  # fmt: skip
    return f"{head or 'unknown'}{'-dirty' if dirty else ''}"


def suite_args(
    report: Path,
    implementation: Implementation,
    run_test: str | None = None,
    skip_tests: Iterable[str] = (),
    features: Sequence[str] = FEATURES,
    parallel: bool = True,
    profiles: Sequence[str] = tuple(PROFILES),
) -> list[str]:
    args = [
        "-test.run", "^TestConformance$",
        "-test.v",
        "-test.timeout", "60m",
        f"-gateway-class={GATEWAY_CLASS}",
        f"-conformance-profiles={','.join(profiles)}",
        f"-supported-features={','.join(features)}",
        f"-report-output={report}",
        f"-organization={implementation.organization}",
        f"-project={implementation.project}",
        f"-url={implementation.url}",
        f"-version={implementation.version or commit()}",
        f"-contact={implementation.contact}",
        # Kept for the next run on the same API server: deleting the namespaces
        # leaves them Terminating until the namespace controller has emptied
        # them, and the next run's Setup would be refused there.
        "-cleanup-base-resources=false",
        f"-timeout-config-overrides={TIMEOUTS}",
        f"-usable-address={USABLE_ADDRESS}",
        f"-unusable-address={UNUSABLE_ADDRESS}",
    ]  # fmt: skip
    if run_test:
        args.append(f"-run-test={run_test}")
    if skips := ",".join(skip_tests):
        args.append(f"-skip-tests={skips}")
    if not parallel:
        args.append("-disable-parallel-tests")
    return args


@dataclass
class SuiteRun:
    returncode: int
    seconds: float
    log: Path
    report: Path


def run_suite(
    suite: Path, kubeconfig: str, workdir: Path, args: list[str], timeout: float = 3600
) -> SuiteRun:
    """Runs the suite binary (in ``workdir``, its output in ``suite.log``)."""
    log = workdir / "suite.log"
    report = Path(next(a.partition("=")[2] for a in args if a.startswith("-report-output=")))
    env = {**os.environ, "KUBECONFIG": kubeconfig}
    started = time.monotonic()
    with log.open("w") as out:
        proc = subprocess.run(
            [str(suite), *args], cwd=workdir, env=env, stdout=out, stderr=subprocess.STDOUT,
            timeout=timeout, check=False,
        )  # fmt: skip
    return SuiteRun(proc.returncode, time.monotonic() - started, log, report)


@dataclass
class Results:
    """The report's core results of one profile."""

    result: str
    passed: int
    failed: int
    skipped: int
    failed_tests: list[str] = field(default_factory=list)
    skipped_tests: list[str] = field(default_factory=list)
    # The extended features' results: result, statistics, failedTests,
    # supportedFeatures, unsupportedFeatures (absent when none was claimed).
    extended: dict[str, Any] = field(default_factory=dict)

    @property
    def extended_failed(self) -> list[str]:
        return list(self.extended.get("failedTests") or [])

    @classmethod
    def read(cls, report: Path, profile: str = PROFILE) -> Results:
        doc = yaml.safe_load(report.read_text())
        found = [p for p in doc.get("profiles") or [] if p.get("name") == profile]
        if not found:
            raise AssertionError(f"no {profile} profile in {report}:\n{report.read_text()}")
        core = found[0].get("core") or {}
        stats = core.get("statistics") or {}
        return cls(
            result=str(core.get("result", "")),
            passed=int(stats.get("Passed", 0)),
            failed=int(stats.get("Failed", 0)),
            skipped=int(stats.get("Skipped", 0)),
            failed_tests=list(core.get("failedTests") or []),
            skipped_tests=list(core.get("skippedTests") or []),
            extended=dict(found[0].get("extended") or {}),
        )


# go test -v's markers: which (sub)test the following lines belong to.
_MARKER = re.compile(r"^\s*(?:=== (?:RUN|CONT|NAME|PAUSE)|--- (?:FAIL|PASS|SKIP):)\s+(\S+)")


def outputs_by_test(log: str) -> dict[str, list[str]]:
    """Each (sub)test's lines of a ``go test -v`` log, by the test's short name
    (the part after ``TestConformance/``; a subtest's lines count for its test
    too). Parallel tests interleave, but go test names the test before each run
    of its lines (``=== NAME``/``=== CONT``)."""
    out: dict[str, list[str]] = {}
    current: list[str] = []
    for line in log.splitlines():
        m = _MARKER.match(line)
        if m is not None:
            parts = m.group(1).split("/")
            names = ["/".join(parts[1:i]) for i in range(2, len(parts) + 1)]
            current = names
        for name in current:
            out.setdefault(name, []).append(line)
    return out


# A log line's source and time: ``    helpers.go:1057: 2026-11-27T15:18:20.77Z: ``.
_STAMP = re.compile(r"^(\s*\S+\.go:\d+: )\d{4}-\d\d-\d\dT[\d:.]+Z: ")
# How long a retried request has been tried: ``(after 18.02s)``.
_AFTER = re.compile(r" \(after [^)]*\)$")


def condensed(lines: Iterable[str]) -> list[str]:
    """Without passed subtests, and each run of one message (the suite polls every
    100 ms, so a wait that times out repeats its message hundreds of times)
    as one line with its count."""
    out: list[str] = []
    last, count = "", 0
    for line in lines:
        if "--- PASS:" in line:
            continue
        key = _AFTER.sub("", _STAMP.sub(r"\1", line))
        if key == last:
            count += 1
            continue
        if count > 1:
            out.append(f"    (the line above {count} times)")
        out.append(line)
        last, count = key, 1
    if count > 1:
        out.append(f"    (the line above {count} times)")
    return out


_FAILED = re.compile(r"^\s*--- FAIL: TestConformance/(\S+)")


def failure_report(log: str, failed: Iterable[str], lines: int = 40) -> str:
    """For each failed test, the output of its failed innermost subtests (else its
    own), condensed, the last ``lines`` lines of each."""
    by_test = outputs_by_test(log)
    failing = {m.group(1) for line in log.splitlines() if (m := _FAILED.match(line))}
    parts = []
    for name in failed:
        inner = sorted(
            f for f in failing
            if f.startswith(name + "/") and not any(g.startswith(f + "/") for g in failing)
        )  # fmt: skip
        for test in inner or [name]:
            own = condensed(by_test.get(test, ["(no output found)"]))
            parts.append(f"==== {test} ====\n" + "\n".join(own[-lines:]))
    return "\n\n".join(parts)


def setup_failure(log: str, lines: int = 60) -> str:
    """The log's tail, when the suite stopped before any test (Setup failed)."""
    return "\n".join(log.splitlines()[-lines:])
