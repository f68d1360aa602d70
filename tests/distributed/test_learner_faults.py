"""The learner's own faults on Ray: ``kill -9`` leaves no process of its cluster behind, the run
resumes with new collectors from its last complete checkpoint, and SIGTERM stops the collectors
with the run.

Each test runs ``rlpipe train --backend ray`` as a subprocess whose environment carries a mark of
the test's own (:data:`TEST_MARK`) and a ``RAY_TMPDIR`` of its own. The processes of that run
(GCS, raylet, its agents, the collector actors) are those under ``/proc`` that carry the mark or
have any file (Ray's logs, sockets) open under that directory: Ray's workers and agents write
their process title over the start of their environment, which loses the mark in some of them.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from rlpipe.framework.middleware import latest_checkpoint
from rlpipe.framework.middleware.ckpt_handler import CKPT_SUFFIX, PERIODIC_PREFIX
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
2-core machine; 0.14-0.32 s in 10 runs in a row with two busy loops and other work beside them.
Without it Ray's two agents outlive the learner by 60 s (they try to report the raylet's death to
the dead GCS for that long), so the bound stays well below 60 s to catch that."""
SIGTERM_EXIT_S = 120.0
"""From SIGTERM to the learner's exit: the iteration in flight, the final checkpoint, Ray's shutdown."""


def _command() -> list[str]:
    """The installed console script beside this interpreter (as a user runs it), else the module."""
    script = Path(sys.executable).with_name("rlpipe")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "rlpipe.cli.main"]


def _uses(pid_dir: Path, root: str) -> bool:
    """Whether the process has any file open under ``root`` or works there."""
    try:
        fds = list((pid_dir / "fd").iterdir())
    except OSError:
        return False
    for link in [pid_dir / "cwd", *fds]:
        try:
            if os.readlink(link).startswith(root + os.sep):
                return True
        except OSError:
            continue
    return False


def _processes(mark: str, root: str) -> dict[int, str]:
    """The live processes that carry ``TEST_MARK=mark`` or use a file under ``root`` (wider than what the
    reaper looks for, so that what it misses is seen): pid -> command line."""
    entry = f"{TEST_MARK}={mark}".encode()
    found = {}
    for pid_dir in Path("/proc").iterdir():
        if not pid_dir.name.isdigit() or int(pid_dir.name) == os.getpid():
            continue
        try:
            if entry in (pid_dir / "environ").read_bytes().split(b"\0") or _uses(pid_dir, root):
                found[int(pid_dir.name)] = (pid_dir / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except OSError:  # ended meanwhile
            continue
    return found


class Learner:
    """``rlpipe ARGS`` in a subprocess (a session of its own, kept off the network), marked ``self.mark``,
    with ``RAY_TMPDIR`` at ``self.ray_tmp`` (short: Ray's socket paths there must fit 107 bytes)."""

    def __init__(self, args: list[str], tmp_path: Path) -> None:
        self.mark = uuid.uuid4().hex
        self.ray_tmp = os.path.realpath(tempfile.mkdtemp(prefix="rlt-"))
        proxy = f"http://127.0.0.1:{closed_loopback_port()}"
        env = {**os.environ, TEST_MARK: self.mark, "RAY_TMPDIR": self.ray_tmp, "PYTHONPATH": str(REPO),
               **dict.fromkeys(PROXY_VARS, proxy)}
        self.out = tmp_path / f"{self.mark}.out"
        self.err = tmp_path / f"{self.mark}.err"
        with self.out.open("w") as out, self.err.open("w") as err:
            self.process = subprocess.Popen([*_command(), *args], cwd=REPO, env=env, stdout=out, stderr=err,
                                            start_new_session=True)

    def processes(self) -> dict[int, str]:
        return _processes(self.mark, self.ray_tmp)

    def collectors(self) -> list[int]:
        return [pid for pid, command in self.processes().items() if command.startswith("ray::CollectorActor")]

    def seconds_until_gone(self, since: float, bound: float) -> float:
        """Seconds from ``since`` until none of its processes is left; fails naming those left after ``bound``."""
        while self.processes():
            if time.monotonic() - since > bound:
                pytest.fail(f"left behind {bound} s after the learner ended: {sorted(self.processes().values())}")
            time.sleep(0.1)
        return time.monotonic() - since

    def wait_until_training(self, run_dir: Path, checkpoint: bool = False) -> None:
        """Until both collectors run and the learner has logged training (and saved a checkpoint: its
        ``.pth.tar``, written after its buffer, so a kill from then on leaves the whole unit)."""
        deadline = time.monotonic() + START_BOUND_S
        while not (len(self.collectors()) == 2 and any(r["kind"] == "train" for r in metrics_so_far(run_dir))
                   and (not checkpoint or any((run_dir / "ckpt").glob(f"{PERIODIC_PREFIX}*{CKPT_SUFFIX}")))):
            assert self.process.poll() is None, self.err.read_text()
            assert time.monotonic() < deadline, "the run did not start training in time"
            time.sleep(0.2)

    def stop(self) -> None:
        """Kill what is left of it (a failed test must not leave a cluster running)."""
        for pid in [self.process.pid, *self.processes()]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
        self.process.wait()
        shutil.rmtree(self.ray_tmp, ignore_errors=True)


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
    assert len(learner.processes()) > 4  # the learner, GCS, raylet, agents, collectors...
    os.kill(learner.process.pid, signal.SIGKILL)
    killed = time.monotonic()
    learner.process.wait()
    gone = learner.seconds_until_gone(killed, GONE_BOUND_S)
    print(f"kill -9 of the learner to its last process gone: {gone:.2f} s")


def test_a_killed_learners_run_resumes_from_its_last_complete_checkpoint(learners, tmp_path) -> None:
    run_dir = tmp_path / "run"
    learner = learners(["train", *RUN, "run.save_freq=100", "--run-dir", str(run_dir)])
    learner.wait_until_training(run_dir, checkpoint=True)
    os.kill(learner.process.pid, signal.SIGKILL)
    learner.process.wait()
    learner.seconds_until_gone(time.monotonic(), GONE_BOUND_S)
    saved = latest_checkpoint(run_dir).state["counters"]["env_step"]
    records_before = len(metrics_so_far(run_dir))

    target = saved + 400
    resumed = learners(["resume", str(run_dir), f"run.max_env_step={target}"])
    assert resumed.process.wait(timeout=START_BOUND_S) == 0, resumed.err.read_text()
    resumed.seconds_until_gone(time.monotonic(), GONE_BOUND_S)
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
    assert not any(pid in learner.processes() for pid in collectors)  # stopped before the learner exited
    learner.seconds_until_gone(time.monotonic(), 5.0)  # the reaper finishes before the learner exits
