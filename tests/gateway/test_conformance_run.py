"""testkit/conformance_run.py's reading of the suite's output: the report's
core results, and each failed test's own lines out of interleaved ``go test -v``
output, condensed (the suite's waits repeat a line every 100 ms)."""

from __future__ import annotations

from pathlib import Path

from testkit.conformance_run import (
    Implementation,
    Results,
    condensed,
    failure_report,
    outputs_by_test,
    suite_args,
)

LOG = """\
=== RUN   TestConformance
=== RUN   TestConformance/A
=== PAUSE TestConformance/A
=== RUN   TestConformance/B
=== RUN   TestConformance/B/one
    helpers.go:1057: 2026-11-27T15:18:20.774775089Z: Expected AttachedRoutes to be 2, got 3
    helpers.go:1057: 2026-11-27T15:18:20.874775089Z: Expected AttachedRoutes to be 2, got 3
    helpers.go:1057: 2026-11-27T15:18:20.974775089Z: Expected AttachedRoutes to be 2, got 3
    tls.go:84: 2026-11-27T15:18:21.0Z: Request failed, not ready yet: EOF (after 1.5s)
    tls.go:84: 2026-11-27T15:18:22.0Z: Request failed, not ready yet: EOF (after 2.5s)
    b.go:93: Error: timed out
=== RUN   TestConformance/B/two
    b.go:99: 2026-11-27T15:18:21.0Z: fine
=== CONT  TestConformance/A
    a.go:10: 2026-11-27T15:18:21.1Z: request passed
=== NAME  TestConformance/B
    apply.go:279: 2026-11-27T15:18:22.0Z: Deleting B
--- FAIL: TestConformance (3.00s)
    --- PASS: TestConformance/A (0.01s)
    --- FAIL: TestConformance/B (2.00s)
        --- FAIL: TestConformance/B/one (1.00s)
        --- PASS: TestConformance/B/two (0.00s)
FAIL
"""

REPORT = """\
apiVersion: gateway.networking.k8s.io/v1
kind: ConformanceReport
profiles:
- name: GATEWAY-HTTP
  core:
    result: failure
    failedTests: [B]
    statistics: {Failed: 1, Passed: 34, Skipped: 1}
    skippedTests: [C]
"""


def test_each_tests_lines_are_told_apart() -> None:
    by_test = outputs_by_test(LOG)
    assert any("request passed" in line for line in by_test["A"])
    assert not any("request passed" in line for line in by_test["B"])
    assert any("Error: timed out" in line for line in by_test["B/one"])
    assert any("Deleting B" in line for line in by_test["B"])
    assert not any("fine" in line for line in by_test["B/one"])


def test_a_failure_shows_its_failed_subtest_condensed() -> None:
    report = failure_report(LOG, ["B"])
    assert report.startswith("==== B/one ====")
    assert report.count("Expected AttachedRoutes") == 1
    assert "(the line above 3 times)" in report
    assert report.count("not ready yet") == 1 and "(the line above 2 times)" in report
    assert "Error: timed out" in report
    assert "fine" not in report and "--- PASS" not in report
    assert condensed(["x", "--- PASS: y", "x"]) == ["x", "    (the line above 2 times)"]


def test_the_report_is_read(tmp_path: Path) -> None:
    path = tmp_path / "report.yaml"
    path.write_text(REPORT)
    r = Results.read(path)
    assert (r.result, r.passed, r.failed, r.skipped) == ("failure", 34, 1, 1)
    assert (r.failed_tests, r.skipped_tests) == (["B"], ["C"])


def test_the_suite_is_told_where_to_report_and_what_to_run(tmp_path: Path) -> None:
    args = suite_args(tmp_path / "r.yaml", Implementation(version="abc"), run_test="A")
    assert f"-report-output={tmp_path / 'r.yaml'}" in args
    assert "-gateway-class=ferryman" in args and "-run-test=A" in args
    assert "-supported-features=Gateway,HTTPRoute,ReferenceGrant,TLSRoute,GRPCRoute" in args
    assert "-conformance-profiles=GATEWAY-HTTP,GATEWAY-TLS,GATEWAY-GRPC" in args
    assert "-cleanup-base-resources=false" in args and "-version=abc" in args
    # Every implementation field is required when a report is written.
    for flag in ("-organization=", "-project=", "-url=", "-contact="):
        (value,) = [a.partition("=")[2] for a in args if a.startswith(flag)]
        assert value
