"""The official Gateway API conformance suite (v1.6.3, profiles GATEWAY-HTTP and
GATEWAY-TLS, in one run and one report) against
ferryman in Kubernetes mode, on the test cluster: the suite's base Deployments
run as echo-basic processes under the test kubelet, and every Gateway takes a
loopback address of ``--gateway-addresses``, where the suite sends its requests.

Passing means every core test of each profile passed, as the suite's own
ConformanceReport says; each failed test's output is printed. Environment:

* ``FERRYMAN_CONFORMANCE_RUN_TEST=Name``: only that test (Setup still runs);
* ``FERRYMAN_CONFORMANCE_SKIP_TESTS=A,B``: skip those;
* ``FERRYMAN_CONFORMANCE_FEATURES=A,B``: claim these features too (the suite is
  told what ferryman's GatewayClass claims: ``kinds/gateway/records/status.py``);
* ``FERRYMAN_CONFORMANCE_PROFILES=A,B``: these profiles only;
* ``FERRYMAN_CONFORMANCE_OUT=DIR``: where the report and logs are kept
  (``scripts/gateway-conformance.sh`` copies the report into docs/);
* ``FERRYMAN_CONFORMANCE_SERVER=angie``: that server only (else Debian's NGINX,
  NGINX 1.30 and Angie one after the other; the other two's reports in
  ``DIR/nginx-1.30`` and ``DIR/angie``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from ferryman.kinds.gateway.records.status import SUPPORTED_FEATURES
from testkit.apiserver import APIServer, apply
from testkit.conformance_run import (
    CONTROLLER_NAME,
    FEATURES,
    GATEWAY_ADDRESSES,
    GATEWAY_CLASS,
    PROFILES,
    Implementation,
    Results,
    failure_report,
    run_suite,
    setup_failure,
    suite_args,
)
from testkit.gateway_environment import Conformance, start_base_pods

# Registers Gateway API's kinds with lightkube (``apply`` decodes by apiVersion and kind).
from testkit.gateway_kinds import RESOURCES
from testkit.harness import Ferryman
from testkit.kubelet import Kubelet


@pytest.fixture(scope="module")
def base_pods(
    gateway_cluster: APIServer, gateway_kubelet: Kubelet, conformance: Conformance
) -> None:
    """The suite's backends, Ready before the suite starts (those mounting the
    suite's own certificate once it made it)."""
    start_base_pods(gateway_cluster.client(), conformance, gateway_kubelet, suite_secrets=True)


@pytest.fixture(scope="module")
def gateway_class(gateway_cluster: APIServer) -> str:
    """The suite's GatewayClass: it never creates one itself."""
    assert "GatewayClass" in RESOURCES
    apply(
        gateway_cluster.client(),
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "GatewayClass",
            "metadata": {"name": GATEWAY_CLASS},
            "spec": {"controllerName": CONTROLLER_NAME},
        },
    )
    return GATEWAY_CLASS


# The servers the suite runs on (testkit.harness.Ferryman.flavour), one after the
# other: Debian's NGINX (whose report docs/gateway-conformance/ keeps), NGINX 1.30
# and Angie; scripts/gateway-conformance.sh can ask for one.
SERVERS = tuple(s for s in [os.environ.get("FERRYMAN_CONFORMANCE_SERVER", "")] if s) or (
    "nginx",
    "nginx-1.30",
    "angie",
)


@pytest.fixture(scope="module", params=SERVERS)
def ferryman(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    gateway_cluster: APIServer,
    gateway_class: str,
) -> Iterator[Ferryman]:
    """ferryman in Kubernetes mode, serving Gateway API on 127.0.0.x; its own
    listeners on free ports (never 80, 443 or 8080, which Gateways use)."""
    f = Ferryman(
        tmp_path_factory.mktemp("conformance-ferryman"),
        extra_args=[
            "--enable-gateway-api",
            *("--gateway-controller-name", CONTROLLER_NAME),
            *("--gateway-addresses", GATEWAY_ADDRESSES),
        ],
        kubeconfig=gateway_cluster.kubeconfig,
        env={"POD_NAME": "ferryman-conformance"},
        flavour=request.param,
    )
    f.start()
    yield f
    f.stop()


def _out_dir(tmp_path: Path) -> Path:
    out = Path(os.environ.get("FERRYMAN_CONFORMANCE_OUT") or tmp_path / "out")
    out.mkdir(parents=True, exist_ok=True)
    return out


@pytest.mark.timeout(3600)
def test_gateway_api_conformance_core(
    tmp_path: Path,
    conformance: Conformance,
    gateway_cluster: APIServer,
    base_pods: None,
    ferryman: Ferryman,
) -> None:
    only = os.environ.get("FERRYMAN_CONFORMANCE_RUN_TEST") or None
    skips = [s for s in os.environ.get("FERRYMAN_CONFORMANCE_SKIP_TESTS", "").split(",") if s]
    extra = [f for f in os.environ.get("FERRYMAN_CONFORMANCE_FEATURES", "").split(",") if f]
    features = sorted({*FEATURES, *SUPPORTED_FEATURES, *extra})
    out = _out_dir(tmp_path)
    if ferryman.flavour != "nginx":  # the other servers' reports beside Debian NGINX's
        out = out / ferryman.flavour
        out.mkdir(exist_ok=True)
    report = out / "report.yaml"
    report.unlink(missing_ok=True)
    profiles = [p for p in os.environ.get("FERRYMAN_CONFORMANCE_PROFILES", "").split(",") if p]
    profiles = profiles or list(PROFILES)
    args = suite_args(report, Implementation(), only, skips, features, profiles=profiles)
    run = run_suite(conformance.suite, gateway_cluster.kubeconfig, out, args)
    shutil.copy(ferryman.log_path, out / "ferryman.log")
    log = run.log.read_text(errors="replace")
    print(f"\nconformance suite: exit {run.returncode} after {run.seconds:.0f} s; log {run.log}")
    assert ferryman.proc is not None and ferryman.proc.poll() is None, "ferryman exited"
    if not report.exists():
        raise AssertionError(f"the suite wrote no report; its log ends:\n{setup_failure(log)}")
    ran = 0
    for profile in profiles:
        results = Results.read(report, profile)
        print(
            f"{profile} core: {results.result}: {results.passed} passed, "
            f"{results.failed} failed, {results.skipped} skipped"
        )
        extended = results.extended
        stats = extended.get("statistics") or {}
        if extended:
            print(f"{profile} extended: {extended.get('result')}: {stats}; claimed "
                  f"{[f for f in extended.get('supportedFeatures') or []]}")  # fmt: skip
        failed = [*results.failed_tests, *results.extended_failed]
        failures = failure_report(log, failed) if failed else ""
        if failures:
            print(failures)
        assert failed == [], failures
        ran += results.passed + int(stats.get("Passed", 0))
        if only:
            continue
        core = PROFILES[profile]
        if skips:  # core or extended ones
            assert results.passed + results.skipped == core, results.skipped_tests
        else:
            assert results.skipped_tests == [] and results.skipped == 0, results.skipped_tests
            assert results.passed == core and results.result == "success"
    if only:
        # A test runs in each profile it belongs to.
        assert ran >= 1, f"{only} did not run:\n{setup_failure(log)}"
