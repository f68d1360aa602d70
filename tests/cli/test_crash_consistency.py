"""Crash consistency: ``kill -9`` at random moments, then ``rlpipe resume``: every resume starts
from a checkpoint and the buffer saved with it, the summary agrees with metrics.jsonl, and no
temporary file is left. A refused resume changes nothing; a run killed before its first
checkpoint can be started again in place."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from rlpipe.cli.main import main
from tests.cli_errors import one_line_error
from tests.run_checks import snapshot, summary_agrees_with_metrics

pytestmark = pytest.mark.crash

REPO = Path(__file__).resolve().parents[2]
FAST = ["run.progress=false", "policy.collect.n_sample=32", "policy.learn.batch_size=16",
        "policy.eval.evaluator.eval_freq=10", "env.n_evaluator_episode=2", "env.evaluator_env_num=2",
        "run.save_freq=4", "run.keep_checkpoints=2", "run.log_freq=4"]


def test_kill_9_at_random_moments_then_resume(tmp_path):
    rng = np.random.default_rng(0)
    run = tmp_path / "run"
    command = [sys.executable, "-m", "rlpipe.cli.main"]
    process = subprocess.Popen([*command, "train", "cartpole-dqn", *FAST, "run.max_env_step=10000000",
                                "--run-dir", str(run)], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    for trial in range(10):
        deadline = time.monotonic() + 120
        while not any((run / "ckpt").glob("*.pth.tar")):  # a first checkpoint, then a random moment
            assert process.poll() is None, process.stderr.read()
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(rng.uniform(0.2, 2.0))  # checkpoints are written every few hundredths of a second
        process.kill()
        process.wait()
        if trial < 9:
            process = subprocess.Popen([*command, "resume", str(run), "--no-progress"], cwd=REPO,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert main(["resume", str(run), "--no-progress", "run.max_env_step=1"]) == 0  # resumes, stops at once
    summary_agrees_with_metrics(run)
    assert not [p for p in run.rglob("*") if p.name.startswith(".") or p.name.endswith(".tmp")]


def test_a_refused_resume_changes_nothing(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", "cartpole-dqn", *FAST, "run.max_env_step=200", "--run-dir", str(run)]) == 0
    before = snapshot(run)
    err = one_line_error(capsys, ["resume", str(run), "run.max_env_step=400",
                                     "policy.other.replay_buffer.replay_buffer_size=5000"])
    assert "holds a buffer of size 20000, this one has 5000" in err
    assert snapshot(run) == before


def test_a_run_killed_before_its_first_checkpoint_starts_again_in_place(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", "cartpole-dqn", *FAST, "run.max_env_step=200", "--run-dir", str(run)]) == 0
    for checkpoint in (run / "ckpt").iterdir():  # as if killed before the first one was written
        checkpoint.unlink()
    err = one_line_error(capsys, ["resume", str(run)])
    assert err.endswith(f"start it again with `rlpipe train {run / 'config.yaml'} --run-dir {run} --overwrite-empty`")
    assert "already holds a run" in one_line_error(capsys, ["train", "cartpole-dqn", "--run-dir", str(run)])
    assert main(["train", str(run / "config.yaml"), "--run-dir", str(run), "--overwrite-empty"]) == 0
    summary_agrees_with_metrics(run)
    assert "holds checkpoints" in one_line_error(capsys, ["train", str(run / "config.yaml"), "--run-dir", str(run),
                                                          "--overwrite-empty"])
