"""SIGTERM and SIGINT stop a run gracefully: a final checkpoint, a summary that agrees with
metrics.jsonl, one line on stderr; ``rlpipe resume`` then continues with the same figures."""
from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlpipe.cli.main import main
from rlpipe.utils.checkpoint import load_checkpoint
from tests.run_checks import metrics_so_far, summary_agrees_with_metrics

pytestmark = pytest.mark.crash

REPO = Path(__file__).resolve().parents[2]
LONG = ["run.max_env_step=10000000", "run.progress=false", "policy.collect.n_sample=40",
        "policy.learn.batch_size=16", "policy.eval.evaluator.eval_freq=5", "env.n_evaluator_episode=2",
        "env.evaluator_env_num=2", "run.save_freq=1000000", "run.log_freq=5"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_run_with_a_final_checkpoint_and_a_true_summary(tmp_path, sig, capsys):
    run_dir = tmp_path / "run"
    process = subprocess.Popen([sys.executable, "-m", "rlpipe.cli.main", "train", "cartpole-dqn", *LONG,
                                "--run-dir", str(run_dir)], cwd=REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while sum(r["kind"] == "eval" for r in metrics_so_far(run_dir)) < 3:  # well into training
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.2)
    process.send_signal(sig)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 128 + sig.value
    summary = summary_agrees_with_metrics(run_dir)
    assert err.strip().splitlines() == [
        f"rlpipe train: stopped by {sig.name} at env step {summary['env_step']}; the final checkpoint "
        f"is saved: continue with `rlpipe resume {run_dir}`"]
    assert summary["stopped_by"] == sig.name
    final = load_checkpoint(run_dir / "ckpt" / "final.pth.tar")
    assert final["counters"]["env_step"] == summary["env_step"]

    assert main(["resume", str(run_dir), f"run.max_env_step={summary['env_step'] + 200}"]) == 0
    resumed = summary_agrees_with_metrics(run_dir)
    assert resumed["stopped_by"] is None and resumed["env_step"] >= summary["env_step"] + 200
    assert resumed["best_eval_return"] >= summary["best_eval_return"]
