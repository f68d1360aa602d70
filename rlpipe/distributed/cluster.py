"""Connecting to Ray, offline and quiet: the one place rlpipe calls ``ray.init``.

Ray is an optional extra (``pip install rlpipe[ray]``, ``scripts/setup.sh ray``); without it
``distributed.backend=ray`` is a one-line error. Usage statistics are off, no dashboard is
started, and a cluster rlpipe starts itself has a capped object store and ends with the
learner, even a learner killed with SIGKILL (:mod:`rlpipe.distributed.reaper`).
"""
from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from types import ModuleType

from rlpipe.config.schema import DistributedConfig
from rlpipe.distributed import reaper
from rlpipe.errors import MissingDependencyError, RlpipeError, first_line

logger = logging.getLogger(__name__)

RAY_START_ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",  # no usage report leaves the machine
    "RAY_USAGE_STATS_PROMPT_ENABLED": "0",
    "RAY_DISABLE_DOCKER_CPU_WARNING": "1",
    # Ray starts its workers at niceness 15, so on a busy machine a collector gets a few percent of a
    # core beside the learner (nice 0): a killed collector's restart (imports, envs, policy) took 78 s
    # under load here, 20-30 s at niceness 0. Collectors are the run's work, not background jobs.
    "RAY_worker_niceness": "0",
}
"""Environment set before Ray starts (its raylet and workers inherit it)."""
LOOPBACK_RAY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
"""Set before ``import ray`` for a cluster on this machine alone: Ray then takes 127.0.0.1 as the
node's address instead of finding the address other machines would reach (which it does by
asking the routing table for a path to 8.8.8.8), so all its traffic stays on the loopback."""
LOOPBACK = "127.0.0.1"
REAPER_EXIT_TIMEOUT_S = 10.0
"""How long the learner waits for the reaper to finish after a normal end (it takes milliseconds)."""
_REAPER_PIPES: set[int] = set()
"""The write ends of the open reapers' pipes: a child forked without exec (a subprocess env's worker)
closes them, or it would hold them open and keep its reaper waiting after the learner's death."""


def _close_reaper_pipes() -> None:
    for fd in _REAPER_PIPES:
        os.close(fd)
    _REAPER_PIPES.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_reaper_pipes)


def import_ray() -> ModuleType:
    """The ``ray`` module, or a one-line error saying which extra to install."""
    try:
        import ray
    except ImportError:
        raise MissingDependencyError(
            "config key 'distributed.backend' is 'ray' but the ray package is not installed: "
            "run scripts/setup.sh ray (or pip install 'rlpipe[ray]')"
        ) from None
    return ray


def check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """One line when nothing listens at a ``host:port`` address (``ray.init`` would retry for
    minutes before it gave up); other forms (``auto``, ``ray://...``) are left to Ray."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "/" in address:
        return
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as err:
        raise RlpipeError(f"config key 'distributed.address': nothing answers at {address} ({err.strerror or err}); "
                          "start the cluster with `ray start --head` first") from None


@contextmanager
def reaped_processes(output_dir: str) -> Iterator[None]:
    """Every program started inside (and its children) is killed when the block ends or this
    process dies, even by SIGKILL: the reaper (:mod:`rlpipe.distributed.reaper`, started here in
    a session of its own) looks, once its pipe from this process closes, for the mark they carry
    in their environment and for processes that write their output under ``output_dir``; this
    process itself is spared. Nothing is watched where there is no ``/proc``."""
    if not os.path.isdir("/proc"):
        yield
        return
    mark = uuid.uuid4().hex
    read_end, write_end = os.pipe()  # not inherited by exec, closed by fork: only this process holds it
    try:
        watcher = subprocess.Popen([sys.executable, "-I", reaper.__file__, mark, output_dir, str(os.getpid())],
                                   stdin=read_end, start_new_session=True)
    finally:
        os.close(read_end)
    _REAPER_PIPES.add(write_end)
    previous = os.environ.get(reaper.MARK_VAR)
    os.environ[reaper.MARK_VAR] = mark
    try:
        yield
    finally:
        if previous is None:
            del os.environ[reaper.MARK_VAR]
        else:
            os.environ[reaper.MARK_VAR] = previous
        _REAPER_PIPES.discard(write_end)
        os.close(write_end)
        try:
            watcher.wait(timeout=REAPER_EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:  # a loaded machine: it finishes on its own, in its own session
            logger.warning("the Ray reaper is still stopping the cluster's processes after %.0f s",
                           REAPER_EXIT_TIMEOUT_S)


@contextmanager
def ray_session(cfg: DistributedConfig, num_collectors: int) -> Iterator[ModuleType]:
    """Ray, ready for ``num_collectors`` collector actors; shut down afterwards if started here.

    A Ray session already open in this process (a test's, a notebook's) is used as it is.
    Otherwise rlpipe connects to ``cfg.address`` (a cluster from ``ray start --head``) or
    starts a local one on the loopback address with at least one CPU slot per collector, so
    that more collectors than cores still run (sharing the cores) instead of waiting for a
    slot forever; it keeps its files in a temp directory of its own, and its processes end
    with this one, even when this one is killed (:func:`reaped_processes`). (Ray's own start-up
    still asks cloud metadata servers what machine it is on; the tests point ``http_proxy`` at a
    closed local port so that nothing leaves.)
    """
    local = cfg.address is None
    for key, value in {**RAY_START_ENV, **(LOOPBACK_RAY_ENV if local else {})}.items():
        os.environ.setdefault(key, value)
    ray = import_ray()
    if ray.is_initialized():
        yield ray
        return
    options: dict[str, object] = {"include_dashboard": False, "logging_level": logging.ERROR,
                                  "log_to_driver": False}
    if local:  # a temp directory of its own: the reaper knows the cluster's processes by their logs there
        options.update(num_cpus=max(os.cpu_count() or 1, num_collectors),
                       object_store_memory=cfg.object_store_mb * 2**20, _node_ip_address=LOOPBACK,
                       _temp_dir=tempfile.mkdtemp(prefix="rlpipe-ray-", dir=os.environ.get("RAY_TMPDIR")))
    if cfg.address is not None:
        check_reachable(cfg.address)
    with reaped_processes(str(options["_temp_dir"])) if local else nullcontext():
        try:
            ray.init(address=cfg.address, **options)
        except ConnectionError as err:
            raise RlpipeError(f"config key 'distributed.address': cannot reach a Ray cluster at {cfg.address} "
                              f"({first_line(err)})") from None
        try:
            yield ray
        finally:
            ray.shutdown()
