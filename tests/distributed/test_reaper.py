"""The reaper: what a block of :func:`~rlpipe.distributed.cluster.reaped_processes` started ends
with the process that opened it, even when that process is killed with SIGKILL."""
from __future__ import annotations

import os
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


def test_the_block_ends_what_it_started_and_leaves_the_environment_as_it_was(tmp_path) -> None:
    before = os.environ.get(reaper.MARK_VAR)
    with reaped_processes(str(tmp_path)):
        assert os.environ[reaper.MARK_VAR] != before
        started = subprocess.Popen(["sleep", "600"])
    assert os.environ.get(reaper.MARK_VAR) == before
    assert started.wait(timeout=GONE_BOUND_S) == -signal.SIGKILL
