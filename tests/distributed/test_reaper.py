"""The reaper: what a block of :func:`~rlpipe.distributed.cluster.reaped_processes` started ends
with the process that opened it, even when that process is killed with SIGKILL."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from rlpipe.distributed import reaper
from rlpipe.distributed.cluster import reaped_processes

pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="the reaper finds processes under /proc")

REPO = Path(__file__).resolve().parents[2]
GONE_BOUND_S = 20.0
"""From the kill to the grandchild gone: the reaper wakes and kills at once (well under 1 s here, idle
or loaded); the bound only keeps a broken reaper from hanging the test."""


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, killed and not yet waited for, does not)."""
    try:
        return "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False


def _wait_gone(pid: int) -> None:
    start = time.monotonic()
    while _alive(pid):
        assert time.monotonic() - start < GONE_BOUND_S, f"process {pid} outlived the reaper's bound"
        time.sleep(0.05)


def _holding_open(title: str, path: Path) -> subprocess.Popen:
    """``sleep 600`` titled ``title`` (its first argument), holding ``path`` open (as Ray's processes their logs)."""
    with path.open("w") as held:
        return subprocess.Popen([title, "600"], executable=shutil.which("sleep"), pass_fds=(held.fileno(),))


def test_a_process_with_a_file_open_under_the_directory_is_the_clusters_only_when_ray_titled_it(tmp_path) -> None:
    root = str(tmp_path.resolve())
    agent = _holding_open("ray::DashboardAgent", tmp_path / "agent.log")
    raylet = _holding_open("/opt/venv/lib/python3.11/site-packages/ray/core/src/ray/raylet/raylet", tmp_path / "r.log")
    # a user's Python whose path merely contains "ray", reading a log of the cluster
    others = [_holding_open(title, tmp_path / "other.log") for title in ("/home/murray/ray-env/bin/python", "xray")]
    try:
        assert sorted(reaper.cluster_processes("no-such-mark", root)) == sorted([agent.pid, raylet.pid])
    finally:
        for process in (agent, raylet, *others):
            process.kill()
            process.wait()


def test_the_learner_is_spared_though_it_carries_the_mark(tmp_path) -> None:
    mark = "test-" + os.urandom(4).hex()
    learner = subprocess.Popen(["sleep", "600"], env={**os.environ, reaper.MARK_VAR: mark})
    try:
        assert reaper.cluster_processes(mark, str(tmp_path), spared=learner.pid) == []
        assert reaper.kill_cluster(mark, str(tmp_path), spared=learner.pid) == 0 and learner.poll() is None
    finally:
        learner.kill()
        learner.wait()


def test_the_cluster_is_what_carries_the_mark_or_writes_its_output_under_the_directory(tmp_path) -> None:
    mark, root = "test-" + os.urandom(4).hex(), str(tmp_path.resolve())
    log = tmp_path / "worker.out"
    # a marked process with a child of its own; an unmarked one whose output goes to a log under root
    # (as a Ray worker's whose title overwrote its mark); beside them, one that only reads that log
    parent = subprocess.Popen(["sh", "-c", "sleep 600 & echo $!; wait"], env={**os.environ, reaper.MARK_VAR: mark},
                              stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    with log.open("w") as out:
        writer = subprocess.Popen(["sleep", "600"], stdout=out)
    reader = subprocess.Popen(["tail", "-f", str(log)], stdout=subprocess.DEVNULL)
    try:
        assert sorted(reaper.cluster_processes(mark, root)) == sorted([parent.pid, child, writer.pid])
        assert reaper.kill_cluster(mark, root) == 3
        assert parent.wait(timeout=5) == -signal.SIGKILL and writer.wait(timeout=5) == -signal.SIGKILL
        _wait_gone(child)
        assert reaper.cluster_processes(mark, root) == [] and reader.poll() is None
    finally:
        reader.kill()
        reader.wait()


OPENER = textwrap.dedent("""
    import subprocess, sys, time
    from rlpipe.distributed.cluster import reaped_processes
    with reaped_processes(sys.argv[1]):
        print(subprocess.Popen(["sleep", "600"]).pid, flush=True)
        time.sleep(600)
""")


def test_what_a_killed_process_started_in_the_block_ends_with_it(tmp_path) -> None:
    opener = subprocess.Popen([sys.executable, "-c", OPENER, str(tmp_path)], cwd=REPO,
                              env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE, text=True)
    started = int(opener.stdout.readline())
    assert _alive(started)
    opener.kill()
    opener.wait()
    _wait_gone(started)  # an orphan now: only the reaper can have ended it


FORKER = textwrap.dedent("""
    import os, subprocess, sys, time
    from rlpipe.distributed.cluster import reaped_processes
    with reaped_processes(sys.argv[1]):
        forked = os.fork()  # as a subprocess env's worker is started: it must not keep the reaper waiting
        if forked == 0:
            time.sleep(600)
            os._exit(0)
        print(forked, subprocess.Popen(["sleep", "600"]).pid, flush=True)
        time.sleep(600)
""")


def test_a_child_forked_in_the_block_does_not_keep_the_reaper_from_its_work(tmp_path) -> None:
    opener = subprocess.Popen([sys.executable, "-c", FORKER, str(tmp_path)], cwd=REPO,
                              env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE, text=True)
    forked, started = map(int, opener.stdout.readline().split())
    try:
        opener.kill()
        opener.wait()
        _wait_gone(started)
    finally:
        os.kill(forked, signal.SIGKILL)


ENDER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from rlpipe.distributed.cluster import reaped_processes
    held = (Path(sys.argv[1]) / "python-core-driver.log").open("w")  # as Ray's driver keeps its logs open
    with reaped_processes(sys.argv[1]):
        pass
    print("ended", flush=True)
""")


def test_a_learner_whose_python_path_names_ray_outlives_its_reaper(tmp_path) -> None:
    # the Python of a venv called ray-env, with Ray's logs open under the cluster's directory as a driver has
    # them after ray.shutdown(): the reaper once took it for a Ray process and killed it at the block's end
    (tmp_path / "ray-env").symlink_to(sys.prefix, target_is_directory=True)
    python = tmp_path / "ray-env" / Path(sys.executable).relative_to(sys.prefix)
    ender = subprocess.run([str(python), "-c", ENDER, str(tmp_path)], cwd=REPO,
                           env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
                           timeout=GONE_BOUND_S)
    assert (ender.returncode, ender.stdout) == (0, "ended\n"), ender.stderr


def test_the_block_ends_what_it_started_and_leaves_the_environment_as_it_was(tmp_path) -> None:
    before = os.environ.get(reaper.MARK_VAR)
    with reaped_processes(str(tmp_path)):
        assert os.environ[reaper.MARK_VAR] != before
        started = subprocess.Popen(["sleep", "600"])
    assert os.environ.get(reaper.MARK_VAR) == before
    assert started.wait(timeout=GONE_BOUND_S) == -signal.SIGKILL
