"""The gymnasium backend: ``num_envs`` environments on gymnasium's vector API, with same-step auto-reset.

:class:`GymnasiumVectorBackend` is a :class:`~rlpipe.envs.protocol.CoreVectorEnv`: it steps and
resets, and restarts hung or dead subprocess workers. :class:`VectorEnvManager` is it with the
wrappers of :mod:`rlpipe.envs.vector_wrappers` around it (NaN checks, episode figures, columnar
batches in which an ended episode's ``next_obs`` is its real last observation while ``obs``
already holds the new episode's first; ``env_error`` flags the placeholder steps of
environments that raised, see :func:`rlpipe.utils.batch.end_episodes_at_failed_steps`).

An environment that raises is recreated by :class:`RecreateOnError`. One that hangs can
only be stopped from outside its process: with ``asynchronous=True`` (one subprocess per
environment) and a ``step_timeout``, a vector step or reset that takes longer (or a worker
that dies) kills every worker and starts them afresh; a step is then reported as failed
for every environment.
"""
from __future__ import annotations

import logging
import multiprocessing
import warnings
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv

from rlpipe.envs.episode_stats import final_success
from rlpipe.envs.factory import EnvFactory
from rlpipe.envs.protocol import CoreStep
from rlpipe.envs.vector_wrappers import NonFiniteCheck, TransitionBatches
from rlpipe.errors import EnvironmentFailedError
from rlpipe.utils.batch import FAILED_STEP

logger = logging.getLogger(__name__)
worker_report_log = logging.getLogger("rlpipe.envs.worker_reports")
"""Where gymnasium's reports of a subprocess env's error (its whole traceback) go instead of the
terminal: nowhere unless a handler is attached (``rlpipe train`` writes ``env_errors.log``)."""
worker_report_log.propagate = False
worker_report_log.setLevel(logging.DEBUG)
WORKER_REPORT_MARKS = ("Received the following error from Worker-", "Traceback (most recent call last)",
                       "Raising the last exception back")


@contextmanager
def worker_reports_to_log() -> Iterator[None]:
    """Send gymnasium's warnings about a failed subprocess env (the worker, its traceback, the
    re-raise: dozens of lines) to :data:`worker_report_log`; the error itself still rises and
    is reported in one line. Other warnings pass through."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        finally:
            for report in caught:
                text = str(report.message)
                if any(mark in text for mark in WORKER_REPORT_MARKS):
                    worker_report_log.debug("%s", text)
                else:
                    warnings.warn_explicit(report.message, report.category, report.filename, report.lineno)


WORKER_FAILURES = (multiprocessing.TimeoutError, EOFError, BrokenPipeError, ConnectionResetError)
"""What waiting on subprocess environments raises when a worker hangs or has died."""


def _failed_steps(info: dict[str, Any], num_envs: int) -> np.ndarray:
    """Which envs' steps failed (RecreateOnError's ``env_error``, in the ended episodes' info)."""
    final_info = info.get("final_info")
    if final_info is None or "_" + FAILED_STEP not in final_info:
        return np.zeros(num_envs, dtype=bool)
    return np.asarray(final_info["_" + FAILED_STEP], dtype=bool)


def _with_final_obs(next_obs: np.ndarray, final_obs: np.ndarray, ended: np.ndarray) -> np.ndarray:
    """A copy of ``next_obs`` whose ``ended`` rows hold the ended episodes' last observations
    (``final_obs``: gymnasium's object array, one entry per env).

    Row by row rather than ``np.stack``: one or two episodes end per vector step, and the loop
    takes 0.5 us where ``np.stack`` took 3.4 us (8 CartPole envs; most collector steps end one).
    """
    out = next_obs.copy()
    for row in ended.tolist():
        out[row] = final_obs[row]
    return out


def _kill_workers(env: AsyncVectorEnv) -> None:
    """What ``close(terminate=True)`` does, but with SIGKILL (a worker may ignore SIGTERM or be
    stuck in a call) and without first waiting on a pending call (which raises again when a
    worker has died)."""
    for process in env.processes:
        if process.is_alive():
            process.kill()
    for pipe in env.parent_pipes:
        if pipe is not None:
            pipe.close()
    for process in env.processes:
        process.join()
    env.closed = True  # nothing left for close() or __del__ to do


class GymnasiumVectorBackend:
    """``num_envs`` copies of one environment, stepped together by gymnasium's vector envs with
    same-step auto-reset: a :class:`~rlpipe.envs.protocol.CoreVectorEnv`.

    ``asynchronous``: each environment in its own subprocess. ``step_timeout`` (seconds;
    needs ``asynchronous``): a step or reset that takes longer, or a worker process that
    dies, restarts every worker; after ``max_consecutive_restarts`` restarts with no episode
    finished between them, the next failure stops the run with one line naming ``name`` (the
    env id) and the timeout. An episode, not a step: an env that hangs at its second step
    completes one step after each restart and was restarted forever (111 restarts in 240 s,
    reported). The first restart is logged; the others are counted (``restarts``), not logged.
    """

    def __init__(
        self,
        factory: EnvFactory,
        num_envs: int,
        asynchronous: bool = False,
        step_timeout: float | None = None,
        max_consecutive_restarts: int = 3,
        name: str = "environment",
    ) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if step_timeout is not None and (not asynchronous or step_timeout <= 0):
            raise ValueError(f"step_timeout needs asynchronous=True and a positive value, got {step_timeout}")
        self._make_vector = lambda: (AsyncVectorEnv if asynchronous else SyncVectorEnv)(
            [factory] * num_envs, autoreset_mode=AutoresetMode.SAME_STEP
        )
        self._env = self._make_vector()
        self._asynchronous = asynchronous
        self._step_timeout = step_timeout
        self._max_consecutive_restarts = max_consecutive_restarts
        self._consecutive_restarts = 0  # worker restarts since an episode last finished
        self._name = name
        self._obs: np.ndarray = np.empty(0)  # what the next step acts on (a failed step's next_obs)
        self.restarts = 0
        self.num_envs = num_envs
        self.observation_space: gym.Space = self._env.single_observation_space
        self.action_space: gym.Space = self._env.single_action_space

    def _watched(self) -> AsyncVectorEnv | None:
        """The vector env when its workers are watched (a ``step_timeout`` is set)."""
        return self._env if self._step_timeout is not None and isinstance(self._env, AsyncVectorEnv) else None

    def reset(self, seed: int | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        """Fresh episodes everywhere, seeded ``seed, seed+1, ...`` when given."""
        with self._reports():
            seeds: list[int | None] | None = None if seed is None else [seed + i for i in range(self.num_envs)]
            while (env := self._watched()) is not None:
                try:
                    env.reset_async(seed=seeds)  # inside: a worker may have died since the last call
                    self._obs, info = env.reset_wait(timeout=self._step_timeout)
                    return self._obs, info
                except WORKER_FAILURES as err:
                    self._restart(env, err)
            self._obs, info = self._env.reset(seed=seeds)
            return self._obs, info

    def reset_envs(self, mask: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
        """Fresh episodes in the envs of ``mask`` (gymnasium's ``reset_mask``)."""
        with self._reports():
            fresh, info = self._env.reset(options={"reset_mask": mask})
        return fresh, info

    def step(self, action: np.ndarray) -> CoreStep:
        """Step every environment once. When the workers are restarted (see the class), every row is a
        failed step and the environments start fresh, unseeded episodes: what happens after a hang
        cannot be reproduced anyway."""
        with self._reports():
            env = self._watched()
            if env is None:
                next_obs, reward, terminated, truncated, info = self._env.step(action)
            else:
                try:
                    env.step_async(action)
                    next_obs, reward, terminated, truncated, info = env.step_wait(timeout=self._step_timeout)
                except WORKER_FAILURES as err:
                    self._restart(env, err)
                    last = self._obs
                    fresh, _ = self.reset()
                    no, yes = np.zeros(self.num_envs, dtype=bool), np.ones(self.num_envs, dtype=bool)
                    return CoreStep(fresh, last, np.zeros(self.num_envs), no, yes, yes,
                                    restarted=True)
        done = terminated | truncated
        ended = done.nonzero()[0]  # not done.any() + np.flatnonzero: 0.2 us instead of 1.9 us
        final_obs, success = next_obs, None
        if len(ended):
            final_obs = _with_final_obs(next_obs, info["final_obs"], ended)
            success = final_success(info, ended)
        failed = _failed_steps(info, len(done))
        if self._consecutive_restarts and (done & ~failed).any():  # an episode finished: the envs work
            self._consecutive_restarts = 0
        self._obs = next_obs
        lives = info.get("lives")
        return CoreStep(next_obs, final_obs, reward, terminated, truncated, failed, success,
                        None if lives is None else np.asarray(lives))

    def _reports(self) -> AbstractContextManager[None]:
        """Subprocess envs' failure reports to the log (see :func:`worker_reports_to_log`)."""
        return worker_reports_to_log() if self._asynchronous else nullcontext()

    def _restart(self, broken: AsyncVectorEnv, err: BaseException) -> None:
        """Kill ``broken``'s workers and start new ones; EnvironmentFailedError after too many with no
        episode finished between.

        ``err`` re-raised instead when the environment code itself raised it (gymnasium then
        drops that worker's pipe): that is not a hang or a death.
        """
        if any(pipe is None for pipe in broken.parent_pipes):
            raise err
        _kill_workers(broken)
        self._consecutive_restarts += 1
        if self._consecutive_restarts > self._max_consecutive_restarts:
            raise EnvironmentFailedError(
                f"{self._name}: its worker processes failed {self._consecutive_restarts} times with no episode "
                f"finished between (a step or reset hung over the step timeout of {self._step_timeout} s, or a "
                f"worker died; last: {err!r})"
            )
        log = logger.warning if self.restarts == 0 else logger.debug
        log("%s: worker processes hung or died (%r): restarting them (further restarts are counted, not logged)",
            self._name, err)
        self._env = self._make_vector()
        self.restarts += 1

    def close(self) -> None:
        try:
            self._env.close()
        except (*WORKER_FAILURES, OSError):  # a worker died: nothing to say goodbye to
            if isinstance(self._env, AsyncVectorEnv):
                _kill_workers(self._env)


class VectorEnvManager(TransitionBatches):
    """The :class:`~rlpipe.envs.protocol.VectorEnv` of ``num_envs`` copies of ``factory``'s env on
    gymnasium's vector envs (:class:`GymnasiumVectorBackend`: ``asynchronous``, ``step_timeout``,
    ``max_consecutive_restarts``, ``name``), with the NaN check ``nonfinite`` (raise, warn or skip),
    seeded ``seed, seed+1, ...``."""

    def __init__(
        self,
        factory: EnvFactory,
        num_envs: int,
        seed: int = 0,
        asynchronous: bool = False,
        step_timeout: float | None = None,
        max_consecutive_restarts: int = 3,
        nonfinite: str = "raise",
        name: str = "environment",
    ) -> None:
        backend = GymnasiumVectorBackend(factory, num_envs, asynchronous, step_timeout, max_consecutive_restarts, name)
        super().__init__(NonFiniteCheck(backend, nonfinite), seed)
