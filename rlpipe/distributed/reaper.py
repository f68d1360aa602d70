"""The reaper: every process of a local Ray cluster ends with the learner that started it, however it ends.

Ray ties the processes ``ray.init`` starts (GCS, raylet, ...) to the driver with the kernel's
parent-death signal, and the raylet kills the driver's actors with it; but the two agents the
raylet starts (dashboard and runtime-env agent) notice the raylet's death, then try for 60 s to
report it to the GCS that died with it before they exit (measured after ``kill -9`` of a learner:
collectors, raylet and GCS gone at once, the agents 61.7 s later).

The learner starts this script (stdlib only, run as a file so that nothing of rlpipe or torch
is imported) before its cluster, with the read end of a pipe as its stdin and a mark that every
process of the cluster carries in its environment (:data:`MARK_VAR`, set before ``ray.init``).
Reading stdin blocks until the learner closes its end or dies (the kernel closes its files then);
the reaper then kills every process that still carries the mark and exits. Linux only: it
finds the processes under ``/proc``.
"""
from __future__ import annotations

import os
import select
import signal
import sys
import time

MARK_VAR = "RLPIPE_RAY_SESSION"
"""The environment variable whose value marks the processes of one local cluster."""
REAP_TIMEOUT_S = 60.0
"""How long the reaper goes on killing: a process that survives SIGKILL that long is the kernel's matter."""


def marked_processes(mark: str, proc: str = "/proc") -> list[int]:
    """The ids of the processes, other than this one, whose environment holds ``MARK_VAR=mark``
    (a process that ended or is not this user's reads as unmarked)."""
    entry = f"{MARK_VAR}={mark}".encode()
    found = []
    for name in os.listdir(proc):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(os.path.join(proc, name, "environ"), "rb") as environ:
                if entry in environ.read().split(b"\0"):
                    found.append(int(name))
        except OSError:
            continue
    return found


def wait_for_end(pid: int, timeout: float) -> None:
    """Block until process ``pid`` has ended (a process killed is still listed while it exits), at most ``timeout``."""
    try:
        handle = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        select.select([handle], [], [], max(timeout, 0.0))
    finally:
        os.close(handle)


def kill_marked(mark: str) -> int:
    """SIGKILL every process marked ``mark``, wait until each has ended, and look again, until a look
    finds none (a process may have started another meanwhile, a raylet a worker); how many were killed."""
    deadline = time.monotonic() + REAP_TIMEOUT_S
    killed: set[int] = set()
    while (pids := marked_processes(mark)) and time.monotonic() < deadline:
        with open(f"/tmp/rf/reaperlog-{mark}", "a") as log:  # DEBUG
            log.write(f"{time.time():.3f} {pids}\n")
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:  # ended on its own meanwhile
                continue
            killed.add(pid)
        for pid in pids:
            wait_for_end(pid, deadline - time.monotonic())
    return len(killed)


def main(mark: str) -> None:
    """Wait until stdin's writer (the learner) closes it or dies, then kill what carries ``mark``."""
    while sys.stdin.buffer.read(4096):  # the learner writes nothing: this returns at end of file
        continue
    kill_marked(mark)
    for _ in range(40):  # DEBUG
        time.sleep(0.1)
        with open(f"/tmp/rf/reaperlog-{mark}", "a") as log:
            log.write(f"late {time.time():.3f} {marked_processes(mark)}\n")


if __name__ == "__main__":
    main(sys.argv[1])
