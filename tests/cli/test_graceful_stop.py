"""SIGTERM and SIGINT stop a run gracefully: a final checkpoint, a summary that agrees with
metrics.jsonl, one line on stderr; ``rlpipe resume`` then continues with the same figures."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlpipe.cli.main import main
from rlpipe.utils.checkpoint import load_checkpoint
from rlpipe.utils.metrics import read_metrics

REPO = Path(__file__).resolve().parents[2]
LONG = ["run.max_env_step=10000000", "run.progress=false", "policy.collect.n_sample=40",
        "policy.learn.batch_size=16", "policy.eval.evaluator.eval_freq=5", "env.n_evaluator_episode=2",
        "env.evaluator_env_num=2", "run.save_freq=1000000", "run.log_freq=5"]


def evals_agree(run_dir: Path) -> dict:
    summary = json.loads((run_dir / "summary.json").read_text())
    returns = [r["return_mean"] for r in read_metrics(run_dir) if r["kind"] == "eval"]
    assert summary["best_eval_return"] == max(returns) and summary["last_eval_return"] == returns[-1]
    return summary


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_run_with_a_final_checkpoint_and_a_true_summary(tmp_path, sig, capsys):
    run_dir = tmp_path / "run"
    process = subprocess.Popen([sys.executable, "-m", "rlpipe.cli.main", "train", "cartpole-dqn", *LONG,
                                "--run-dir", str(run_dir)], cwd=REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while sum(r["kind"] == "eval" for r in read_metrics_or_none(run_dir)) < 3:  # well into training
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.2)
    process.send_signal(sig)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 128 + sig.value
    assert err.strip().splitlines() == [
        f"rlpipe train: stopped by {sig.name} at env step {load_summary(run_dir)['env_step']}; the final checkpoint "
        f"is saved: continue with `rlpipe resume {run_dir}`"]
    summary = evals_agree(run_dir)
    assert summary["stopped_by"] == sig.name
    final = load_checkpoint(run_dir / "ckpt" / "final.pth.tar")
    assert final["counters"]["env_step"] == summary["env_step"]

    assert main(["resume", str(run_dir), f"run.max_env_step={summary['env_step'] + 200}"]) == 0
    resumed = evals_agree(run_dir)
    assert resumed["stopped_by"] is None and resumed["env_step"] >= summary["env_step"] + 200
    assert resumed["best_eval_return"] >= summary["best_eval_return"]


def read_metrics_or_none(run_dir: Path) -> list[dict]:
    """The records so far; none while the file is missing or its last line is half written."""
    try:
        return read_metrics(run_dir)
    except (FileNotFoundError, ValueError):
        return []


def load_summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())
