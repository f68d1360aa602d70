"""The reaper: every process of a local Ray cluster ends with the learner that started it, however it ends.

Ray ties the processes ``ray.init`` starts (GCS, raylet, ...) to the driver with the kernel's
parent-death signal, and the raylet kills the driver's actors with it; but the two agents the
raylet starts (dashboard and runtime-env agent) notice the raylet's death, then try for 60 s to
report it to the GCS that died with it before they exit (measured after ``kill -9`` of a learner:
collectors, raylet and GCS gone at once, the agents 61.7 s later).

The learner starts this script (stdlib only, run as a file so that nothing of rlpipe or torch
is imported) before its cluster, with the read end of a pipe as its stdin. Reading stdin blocks
until the learner closes its end or dies (the kernel closes its files then); the reaper then
kills every process of the cluster and exits. A process of the cluster is one that carries the
cluster's mark in its environment (:data:`MARK_VAR`, set before ``ray.init``), or one whose
output (stdout or stderr) goes to a file under the cluster's own temp directory (Ray sends every
process's output to its log files there; a user's ``tail -f`` of such a log is left alone), or a
Ray process (titled ``ray::...``, or Ray's ``raylet`` or ``gcs_server``) with any file open there
(the agents' own logs). All three, because Ray's workers and agents write their process title
over the start of their environment block, and the raylet hands its children their environment
in no fixed order: the mark was lost that way in about one run in three (measured), and under
load agents lost both the mark and the redirect. The learner is never one of them: it keeps its
own Ray logs open there after ``ray.shutdown()``, while it waits for the reaper after a normal
end. Linux only: it finds the processes under ``/proc``.
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


def _open_files_under(pid_dir: str, root: str, fds: tuple[str, ...] | None = None) -> bool:
    """Whether the process of ``/proc/PID`` holds a file under ``root`` open (any, or those of ``fds``)."""
    fd_dir = os.path.join(pid_dir, "fd")
    try:
        names = fds if fds is not None else tuple(os.listdir(fd_dir))
    except OSError:  # ended, or not this user's
        return False
    for fd in names:
        try:
            target = os.readlink(os.path.join(fd_dir, fd))
        except OSError:  # closed, or the process ended
            continue
        if target.startswith(root + os.sep):
            return True
    return False


RAY_EXECUTABLES = (b"raylet", b"gcs_server")
"""The names of Ray's own programs (the others are Python, titled ``ray::...`` once started)."""


def _is_ray_process(pid_dir: str) -> bool:
    """Whether the process's title (its first argument) is a Ray process's: ``ray::...`` or Ray's
    own programs. Not merely one that contains "ray": a Python under ``/home/murray`` or a
    ``ray-env`` is not Ray."""
    with open(os.path.join(pid_dir, "cmdline"), "rb") as cmdline:
        title = cmdline.read().split(b"\0", 1)[0]
    return title.startswith(b"ray::") or os.path.basename(title) in RAY_EXECUTABLES


def _of_cluster(pid_dir: str, root: str) -> bool:
    """Whether the process writes its output under ``root``, or is a Ray process with a file open there
    (the agents keep their logs there, and some lose their output redirection and their mark)."""
    if _open_files_under(pid_dir, root, ("1", "2")):
        return True
    return _open_files_under(pid_dir, root) and _is_ray_process(pid_dir)


def cluster_processes(mark: str, root: str, spared: int | None = None, proc: str = "/proc") -> list[int]:
    """The ids of the processes, other than this one and ``spared`` (the learner), that carry
    ``MARK_VAR=mark`` in their environment or belong to it by their files under ``root``
    (:func:`_of_cluster`); a process that ended or is not this user's counts as neither."""
    entry = f"{MARK_VAR}={mark}".encode()
    found = []
    for name in os.listdir(proc):
        if not name.isdigit() or int(name) in (os.getpid(), spared):
            continue
        pid_dir = os.path.join(proc, name)
        try:
            with open(os.path.join(pid_dir, "environ"), "rb") as environ:
                marked = entry in environ.read().split(b"\0")
            if marked or _of_cluster(pid_dir, root):
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


def kill_cluster(mark: str, root: str, spared: int | None = None) -> int:
    """SIGKILL every process of the cluster (:func:`cluster_processes`, never ``spared``), wait until
    each has ended, and look again, until a look finds none (one may have started another meanwhile,
    a raylet a worker); how many were killed."""
    deadline = time.monotonic() + REAP_TIMEOUT_S
    killed: set[int] = set()
    while (pids := cluster_processes(mark, root, spared)) and time.monotonic() < deadline:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:  # ended on its own meanwhile
                continue
            killed.add(pid)
        for pid in pids:
            wait_for_end(pid, deadline - time.monotonic())
    return len(killed)


def main(mark: str, root: str, learner: int) -> None:
    """Wait until stdin's writer (the learner, process ``learner``) closes it or dies, then kill the
    cluster ``mark`` and ``root`` name."""
    while sys.stdin.buffer.read(4096):  # the learner writes nothing: this returns at end of file
        continue
    kill_cluster(mark, os.path.realpath(root), spared=learner)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
