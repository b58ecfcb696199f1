"""bench/rollout.py end to end at its smallest: 2 pods rolled once under load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench.rollout import main

MODES = {
    "no-gates": ([], "rollout-no-gates.json"),
    "gates": (["--gates"], "rollout-gates.json"),
    # deploy/'s webhook through a Service following readiness, clients following
    # it too, the leader stopped 2 s into each rollout: every new pod gated.
    "webhook": (
        ["--webhook", "--follow-readiness", "--stall", "2", "--stall-role", "leader"],
        "rollout-webhook-follow-leader-stalled.json",
    ),
}


@pytest.mark.parametrize("mode", list(MODES))
def test_the_rollout_bench_runs_and_reports(tmp_path: Path, mode: str) -> None:
    flags, name = MODES[mode]
    result = main(
        ["--replicas", "2", "--rollouts", "1", "--settle", "1", "--rate", "100",
         "--start-delay", "0.2", "--out", str(tmp_path), "--work", str(tmp_path / "work"),
         *flags]
    )  # fmt: skip
    written = json.loads((tmp_path / name).read_text())
    assert written == result
    assert result["mode"] == mode
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
    if mode == "webhook":
        assert result["pods"] == result["pods_gated"] == 4  # 2 first, 2 rolled
        assert result["webhook_connections_proxied"] >= 1  # the API server keeps it alive
        assert result["rollouts"][0]["stalled_replica"].startswith("ferryman-")
    if mode != "no-gates":
        # Ready waited for both replicas: nothing failed, and each new pod
        # answered through both about when (polled every 0.1 s) or before the
        # API said Ready.
        assert result["failed"] == 0
        assert result["routed_after_ready_s"]["max"] < 0.5
