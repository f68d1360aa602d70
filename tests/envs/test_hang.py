"""A vector step that hangs restarts the subprocess environments; its rows are failed steps."""
from __future__ import annotations

import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from rlpipe.envs import VectorEnvManager

ACTION = np.zeros(1, dtype=np.int64)


class Hangs(gym.Env):
    """Counts up; its second step sleeps for a minute while ``marker`` is missing (and creates it),
    or on every step with ``always``."""

    def __init__(self, marker: str, always: bool = False) -> None:
        self.marker, self.always = Path(marker), always
        self.observation_space = gym.spaces.Box(0, 100, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return np.zeros(1, dtype=np.float32), {}

    def step(self, action):
        self.t += 1
        if self.always or (self.t == 2 and not self.marker.exists()):
            self.marker.touch()
            time.sleep(60)
        return np.full(1, self.t, dtype=np.float32), 1.0, False, self.t >= 5, {}


def test_a_hung_step_restarts_the_environments_and_fails_that_step(tmp_path) -> None:
    marker = str(tmp_path / "hung")
    env = VectorEnvManager(lambda: Hangs(marker), 1, seed=0, asynchronous=True, step_timeout=1.0)
    try:
        first = env.step(ACTION)
        hung = env.step(ACTION)
        assert hung["env_error"].all() and hung["truncated"].all() and not hung["terminated"].any()
        assert hung["reward"].tolist() == [0.0] and hung["next_obs"].tolist() == first["next_obs"].tolist()
        after = env.step(ACTION)  # a fresh episode in a new worker
        assert env.restarts == 1 and not after["env_error"].any()
        assert after["obs"].tolist() == [[0.0]] and after["next_obs"].tolist() == [[1.0]]
    finally:
        env.close()


def test_environments_that_keep_hanging_stop_the_run(tmp_path) -> None:
    env = VectorEnvManager(
        lambda: Hangs(str(tmp_path / "m"), always=True), 1, asynchronous=True, step_timeout=0.5,
        max_consecutive_hangs=1,
    )
    try:
        assert env.step(ACTION)["env_error"].all()
        with pytest.raises(RuntimeError, match=r"hung .* 2 times in a row"):
            env.step(ACTION)
    finally:
        env.close()


def test_a_step_timeout_needs_subprocess_environments() -> None:
    with pytest.raises(ValueError, match="step_timeout needs asynchronous=True"):
        VectorEnvManager(lambda: Hangs("unused"), 1, step_timeout=1.0)
