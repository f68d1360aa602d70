"""Subprocess environments that hang or die are restarted; a step they break is a failed step."""
from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from rlpipe.envs import VectorEnvManager, env_factory
from rlpipe.envs.vector import worker_report_log
from rlpipe.errors import EnvironmentFailedError

ACTION = np.zeros(1, dtype=np.int64)


class Breaks(gym.Env):
    """Counts up to 5 steps. The first time (while ``marker`` is missing; always with
    ``always``) that its step ``at_step`` comes, or its reset number ``at_reset``, it does
    ``how``: "hang" (sleeps for a minute, ignoring SIGTERM) or "die" (SIGKILLs itself)."""

    def __init__(self, marker: str, how: str = "hang", at_step: int = 0, at_reset: int = 0, always=False) -> None:
        self.marker, self.how, self.always = Path(marker), how, always
        self.at_step, self.at_reset, self.resets = at_step, at_reset, 0
        self.observation_space = gym.spaces.Box(0, 100, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)

    def _break(self) -> None:
        if self.always or not self.marker.exists():
            self.marker.touch()
            if self.how == "die":
                os.kill(os.getpid(), signal.SIGKILL)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            time.sleep(60)

    def reset(self, *, seed=None, options=None):
        self.t, self.resets = 0, self.resets + 1
        if self.resets == self.at_reset:
            self._break()
        return np.zeros(1, dtype=np.float32), {}

    def step(self, action):
        self.t += 1
        if self.t == self.at_step:
            self._break()
        return np.full(1, self.t, dtype=np.float32), 1.0, False, self.t >= 5, {}


def manager(tmp_path, timeout=1.0, **kwargs) -> VectorEnvManager:
    marker = str(tmp_path / "broke")
    return VectorEnvManager(lambda: Breaks(marker, **kwargs), 1, seed=0, asynchronous=True, step_timeout=timeout)


@pytest.mark.parametrize("how", ["hang", "die"])
def test_a_broken_step_restarts_the_environments_and_fails_that_step(tmp_path, how: str) -> None:
    env = manager(tmp_path, how=how, at_step=2)
    try:
        first = env.step(ACTION)
        start = time.monotonic()
        broken = env.step(ACTION)
        assert time.monotonic() - start < 10  # a worker ignoring SIGTERM is killed all the same
        assert broken["env_error"].all() and broken["truncated"].all() and not broken["terminated"].any()
        assert broken["reward"].tolist() == [0.0] and broken["next_obs"].tolist() == first["next_obs"].tolist()
        after = env.step(ACTION)  # a fresh episode in a new worker
        assert env.restarts == 1 and not after["env_error"].any()
        assert after["obs"].tolist() == [[0.0]] and after["next_obs"].tolist() == [[1.0]]
    finally:
        env.close()


def test_a_hung_reset_restarts_the_environments(tmp_path) -> None:
    env = manager(tmp_path, at_reset=2)
    try:
        assert env.reset().tolist() == [[0.0]] and env.restarts == 1
    finally:
        env.close()


def test_environments_that_keep_hanging_stop_the_run(tmp_path) -> None:
    env = manager(tmp_path, timeout=0.5, at_step=1, always=True)
    try:
        for _ in range(3):
            assert env.step(ACTION)["env_error"].all()
        with pytest.raises(EnvironmentFailedError, match=r"failed 4 times with no episode finished between "
                                                         r"\(a step or reset hung over the step timeout of 0.5 s"):
            env.step(ACTION)
    finally:
        env.close()


def test_a_worker_that_died_between_calls_is_restarted_and_close_still_works() -> None:
    env = VectorEnvManager(env_factory("CartPole-v1"), 2, seed=0, asynchronous=True, step_timeout=5.0)
    try:
        env.step(np.zeros(2, dtype=np.int64))
        worker = env.unwrapped._env.processes[0]
        worker.kill()
        worker.join()
        assert env.step(np.zeros(2, dtype=np.int64))["env_error"].all() and env.restarts == 1
        worker = env.unwrapped._env.processes[1]
        worker.kill()
        worker.join()
    finally:
        env.close()  # a dead worker is killed, not waited for


def test_subprocess_envs_from_a_config_watch_their_workers_by_default() -> None:
    from rlpipe.config import load_config
    from rlpipe.recipes.envs import ASYNC_STEP_TIMEOUT_S, make_vector_env

    env = make_vector_env(load_config("cartpole-dqn", ["env.asynchronous=true"]), 2, seed=0)
    try:
        # no step_timeout given: a dead worker is still found
        assert env.unwrapped._step_timeout == ASYNC_STEP_TIMEOUT_S
        env.unwrapped._env.processes[1].kill()
        env.unwrapped._env.processes[1].join()
        assert env.step(np.zeros(2, dtype=np.int64))["env_error"].all() and env.restarts == 1
    finally:
        env.close()


@pytest.mark.filterwarnings("error")  # gymnasium's report of the worker's error must not reach the terminal
def test_an_error_the_environment_raises_itself_is_not_taken_for_a_dead_worker() -> None:
    class RaisesEOF(Breaks):
        def step(self, action):
            raise EOFError("the simulator's socket closed")

    reports = []
    handler = logging.Handler()
    handler.emit = lambda record: reports.append(record.getMessage())
    worker_report_log.addHandler(handler)
    env = VectorEnvManager(lambda: RaisesEOF("unused"), 1, asynchronous=True, step_timeout=5.0)
    try:
        with pytest.raises(EOFError, match="socket closed"):
            env.step(ACTION)
        assert env.restarts == 0
    finally:
        env.close()
        worker_report_log.removeHandler(handler)
    assert any("Traceback" in report and "socket closed" in report for report in reports)  # kept for the log file


def test_a_step_timeout_needs_subprocess_environments() -> None:
    with pytest.raises(ValueError, match="step_timeout needs asynchronous=True"):
        VectorEnvManager(lambda: Breaks("unused"), 1, step_timeout=1.0)
