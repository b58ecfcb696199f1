"""bench/machine_drain.py end to end: a Machine deleted under load, with and without the hook."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench.machine_drain import main


@pytest.mark.parametrize("mode", ["no-hook", "hook"])
def test_the_machine_drain_bench_runs_and_reports(tmp_path: Path, mode: str) -> None:
    result = main(
        ["--term-delay", "0", "--settle", "1", "--rate", "100", "--start-delay", "0.2",
         "--out", str(tmp_path), "--work", str(tmp_path / "work"),
         *(["--hook"] if mode == "hook" else [])]
    )  # fmt: skip
    written = json.loads((tmp_path / f"machine-drain-{mode}-term0s.json").read_text())
    assert written == result
    assert result["mode"] == mode
    assert result["requests"] > 100
    assert result["failed"] == sum(result["failed_by_kind"].values())
    marks = result["timeline_s"]
    # The drain evicted the replica's pod and waited for the replica to stop;
    # the Machine went after its instance, and the Deployment got its 4 back.
    assert marks["replica_evicted"] < marks["replica_exited"] <= marks["machine_gone"]
    assert marks["instance_deleted"] <= marks["machine_gone"] == result["deletion_s"]
    assert "replica_killed" not in marks and "replaced" in marks
    # The Machine's two pods, the shared Node's two and the two replacements.
    assert result["pods_answering"] == 6
    reasons = [e["reason"] for e in result["events"]]
    if mode == "no-hook":
        assert result["hook"] is None
        assert reasons[0] == "DrainProceeds"
        return
    # The hook: traffic left before the drain began, and nothing failed.
    # (The machine controller's DrainBlocked and ferryman's Draining race.)
    order = [reasons.index(r) for r in ("IngressTrafficDraining", "IngressTrafficDrained")]
    assert order[0] < order[1] < reasons.index("DrainProceeds")
    assert "DrainBlocked" in reasons[: order[1]]
    # The pre-terminate hook went once the replica had stopped (after the drain
    # began; the machine controller's own Events may come later).
    assert reasons.index("IngressReplicaStopped") > reasons.index("DrainProceeds")
    assert result["hook"]["result"] == "drained"
    assert marks["replica_unready"] < result["hook"]["held_s"] < marks["cordoned"]
    assert result["last_answer_s"]["machine_pods"] < marks["cordoned"]
    assert result["failed"] == 0, result["failures"]
