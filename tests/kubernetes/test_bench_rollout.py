"""bench/rollout.py end to end at its smallest: 2 pods rolled once under load."""

from __future__ import annotations

import json
from pathlib import Path

from bench.rollout import main


def test_the_rollout_bench_runs_and_reports(tmp_path: Path) -> None:
    result = main(
        ["--replicas", "2", "--rollouts", "1", "--settle", "1", "--rate", "100",
         "--start-delay", "0.2", "--out", str(tmp_path), "--work", str(tmp_path / "work")]
    )  # fmt: skip
    written = json.loads((tmp_path / "rollout-no-gates.json").read_text())
    assert written == result
    assert result["mode"] == "no-gates"
    assert result["requests"] > 100
    assert result["failed"] == sum(result["failed_by_kind"].values())
    (rollout,) = result["rollouts"]
    assert 0 < rollout["complete_s"] <= rollout["old_pods_gone_s"]
    # The two first pods and the two that replaced them all answered, through
    # both replicas, and the new ones were seen routed after they were Ready.
    assert result["pods_answering"] == 4
    assert result["new_pods_never_answering"] == 0
    assert result["routed_after_ready_s"]["max"] is not None
    assert result["answered_after_deletion_s"]["max"] is not None
