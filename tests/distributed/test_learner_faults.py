"""The learner's own faults on Ray: ``kill -9`` leaves no process of its cluster behind, the run
resumes with new collectors from its last complete checkpoint, and SIGTERM stops the collectors
with the run.

Each test runs ``rlpipe train --backend ray`` as a subprocess whose environment carries a mark of
the test's own (:data:`TEST_MARK`); Ray's processes (GCS, raylet, its agents, the collector
actors) inherit it, so the processes of that run are the ones under ``/proc`` that carry it.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from rlpipe.framework.middleware import latest_checkpoint
from tests.distributed.conftest import PROXY_VARS, closed_loopback_port
from tests.run_checks import metrics_so_far

pytestmark = [pytest.mark.ray, pytest.mark.crash,
              pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds a run's processes under /proc")]

REPO = Path(__file__).resolve().parents[2]
TEST_MARK = "RLPIPE_TEST_RUN"
RUN = ["cartpole-dqn", "--backend", "ray", "--collectors", "2", "run.progress=false", "run.torch_threads=1",
       "env.collector_env_num=4", "policy.collect.n_sample=40", "policy.learn.update_per_collect=10",
       "policy.random_collect_size=200", "policy.eval.evaluator.eval_freq=100000", "run.log_freq=10",
       "run.max_env_step=10000000"]
START_BOUND_S = 240.0
"""Until the run has trained with both collectors (about 15 s idle, 40 s loaded here): a generous
cap that only stops a run that never gets going from hanging the suite."""
GONE_BOUND_S = 30.0
"""From the learner's kill to the last process of its cluster gone. rlpipe's reaper kills them as
soon as the learner dies: measured 0.5 s (idle) and up to 2.6 s (two busy loops beside it) on a
2-core machine. Without it Ray's two agents outlive the learner by 60 s (they try to report the
raylet's death to the dead GCS for that long), so the bound stays well below 60 s to catch that."""
SIGTERM_EXIT_S = 120.0
"""From SIGTERM to the learner's exit: the iteration in flight, the final checkpoint, Ray's shutdown."""


def _command() -> list[str]:
    """The installed console script beside this interpreter (as a user runs it), else the module."""
    script = Path(sys.executable).with_name("rlpipe")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "rlpipe.cli.main"]


def _marked(mark: str) -> dict[int, str]:
    """The live processes whose environment carries ``TEST_MARK=mark``: pid -> command line."""
    entry = f"{TEST_MARK}={mark}".encode()
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if entry in (Path("/proc", name) / "environ").read_bytes().split(b"\0"):
                found[int(name)] = (Path("/proc", name) / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:  # ended meanwhile
            continue
    return found


def _seconds_until_gone(mark: str, since: float, bound: float) -> float:
    """Seconds from ``since`` until no process carries ``mark``; fails naming those left after ``bound``."""
    while _marked(mark):
        if time.monotonic() - since > bound:
            pytest.fail(f"left behind {bound} s after the learner ended: {sorted(_marked(mark).values())}")
        time.sleep(0.1)
    return time.monotonic() - since


class Learner:
    """``rlpipe ARGS`` in a subprocess (a session of its own, kept off the network), marked ``self.mark``."""

    def __init__(self, args: list[str], tmp_path: Path) -> None:
        self.mark = uuid.uuid4().hex
        proxy = f"http://127.0.0.1:{closed_loopback_port()}"
        env = {**os.environ, TEST_MARK: self.mark, "PYTHONPATH": str(REPO), **dict.fromkeys(PROXY_VARS, proxy)}
        self.out = tmp_path / f"{self.mark}.out"
        self.err = tmp_path / f"{self.mark}.err"
        with self.out.open("w") as out, self.err.open("w") as err:
            self.process = subprocess.Popen([*_command(), *args], cwd=REPO, env=env, stdout=out, stderr=err,
                                            start_new_session=True)

    def collectors(self) -> list[int]:
        return [pid for pid, command in _marked(self.mark).items() if command.startswith("ray::CollectorActor")]

    def wait_until_training(self, run_dir: Path, checkpoint: bool = False) -> None:
        """Until both collectors run and the learner has logged training (and saved a checkpoint)."""
        deadline = time.monotonic() + START_BOUND_S
        while not (len(self.collectors()) == 2 and any(r["kind"] == "train" for r in metrics_so_far(run_dir))
                   and (not checkpoint or any((run_dir / "ckpt").glob("iteration_*")))):
            assert self.process.poll() is None, self.err.read_text()
            assert time.monotonic() < deadline, "the run did not start training in time"
            time.sleep(0.2)

    def stop(self) -> None:
        """Kill what is left of it (a failed test must not leave a cluster running)."""
        for pid in [self.process.pid, *_marked(self.mark)]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
        self.process.wait()


@pytest.fixture
def learners(tmp_path):
    started: list[Learner] = []

    def start(args: list[str]) -> Learner:
        started.append(Learner(args, tmp_path))
        return started[-1]

    yield start
    for learner in started:
        learner.stop()


def test_a_killed_learner_leaves_no_process_of_its_cluster(learners, tmp_path) -> None:
    run_dir = tmp_path / "run"
    learner = learners(["train", *RUN, "--run-dir", str(run_dir)])
    learner.wait_until_training(run_dir)
    assert len(_marked(learner.mark)) > 4  # the learner, GCS, raylet, agents, collectors...
    os.kill(learner.process.pid, signal.SIGKILL)
    killed = time.monotonic()
    learner.process.wait()
    gone = _seconds_until_gone(learner.mark, killed, GONE_BOUND_S)
    print(f"kill -9 of the learner to its last process gone: {gone:.2f} s")


def test_a_killed_learners_run_resumes_from_its_last_complete_checkpoint(learners, tmp_path) -> None:
    run_dir = tmp_path / "run"
    learner = learners(["train", *RUN, "run.save_freq=100", "--run-dir", str(run_dir)])
    learner.wait_until_training(run_dir, checkpoint=True)
    os.kill(learner.process.pid, signal.SIGKILL)
    learner.process.wait()
    _seconds_until_gone(learner.mark, time.monotonic(), GONE_BOUND_S)
    saved = latest_checkpoint(run_dir).state["counters"]["env_step"]
    records_before = len(metrics_so_far(run_dir))

    target = saved + 400
    resumed = learners(["resume", str(run_dir), f"run.max_env_step={target}"])
    assert resumed.process.wait(timeout=START_BOUND_S) == 0, resumed.err.read_text()
    _seconds_until_gone(resumed.mark, time.monotonic(), GONE_BOUND_S)
    summary = json.loads(resumed.out.read_text().splitlines()[-1])
    assert summary["env_step"] >= target and summary["stopped_by"] is None
    new_records = [r for r in metrics_so_far(run_dir)[records_before:] if r["kind"] == "train"]
    # it went on from the checkpoint's counters (saved at train iteration 100, near env step 600; a fresh
    # start logs first near env step 240), with new collectors delivering: a Ray learner steps no env itself
    assert new_records and saved < new_records[0]["env_step"]
    assert latest_checkpoint(run_dir).state["counters"]["env_step"] == summary["env_step"]


def test_sigterm_stops_the_collectors_with_the_run(learners, tmp_path) -> None:
    run_dir = tmp_path / "run"
    learner = learners(["train", *RUN, "run.save_freq=1000000", "--run-dir", str(run_dir)])
    learner.wait_until_training(run_dir)
    collectors = learner.collectors()
    learner.process.send_signal(signal.SIGTERM)
    assert learner.process.wait(timeout=SIGTERM_EXIT_S) == 128 + signal.SIGTERM.value  # as a local run's
    summary = json.loads(learner.out.read_text().splitlines()[-1])
    assert learner.err.read_text().strip().splitlines()[-1] == (
        f"rlpipe train: stopped by SIGTERM at env step {summary['env_step']}; the final checkpoint is saved: "
        f"continue with `rlpipe resume {run_dir}`")
    assert (run_dir / "ckpt" / "final.pth.tar").is_file()
    assert not any(pid in _marked(learner.mark) for pid in collectors)  # stopped before the learner exited
    _seconds_until_gone(learner.mark, time.monotonic(), 5.0)  # the reaper finishes before the learner exits
