"""Worker restarts are bounded by finished episodes, not by steps: an env that hangs at the same
point of every episode stops the run with one line naming it and the timeout, while one that hangs
now and then between finished episodes is restarted as often as it hangs."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from rlpipe.envs import VectorEnvManager
from rlpipe.errors import EnvironmentFailedError

ACTION = np.zeros(1, dtype=np.int64)


class HangsEveryOtherEpisode(gym.Env):
    """Episodes of 3 steps; in every second episode (counted in a file, across restarts) step 2 hangs."""

    def __init__(self, counter: str) -> None:
        self.counter = Path(counter)
        self.observation_space = gym.spaces.Box(0, 100, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        episodes = int(self.counter.read_text() or 0) + 1 if self.counter.exists() else 1
        self.counter.write_text(str(episodes))
        self.t, self.hangs = 0, episodes % 2 == 0
        return np.zeros(1, dtype=np.float32), {}

    def step(self, action):
        self.t += 1
        if self.hangs and self.t == 2:
            time.sleep(60)
        return np.full(1, self.t, dtype=np.float32), 1.0, False, self.t >= 3, {}


def test_an_env_that_hangs_between_finished_episodes_is_restarted_as_often_as_it_hangs(tmp_path) -> None:
    counter = str(tmp_path / "episodes")
    env = VectorEnvManager(lambda: HangsEveryOtherEpisode(counter), 1, seed=0, asynchronous=True, step_timeout=0.5,
                           name="HangsEveryOtherEpisode")
    try:
        failed = [bool(env.step(ACTION)["env_error"].all()) for _ in range(30)]
        assert env.restarts == sum(failed) >= 5  # more than max_consecutive_restarts, and the run goes on
    finally:
        env.close()


def test_an_env_that_hangs_at_its_second_step_stops_after_four_failures(tmp_path) -> None:
    from tests.hanging_env import HangingCartPole

    env = VectorEnvManager(lambda: HangingCartPole(hang_at=2), 1, seed=0, asynchronous=True, step_timeout=0.5,
                           name="LateHangingCartPole-v0")
    try:
        for _ in range(3):  # one good step, then a hang, after each restart
            assert not env.step(ACTION)["env_error"].any() and env.step(ACTION)["env_error"].all()
        assert not env.step(ACTION)["env_error"].any()
        with pytest.raises(EnvironmentFailedError, match=r"^LateHangingCartPole-v0: its worker processes failed 4 "
                                                         r"times with no episode finished between"):
            env.step(ACTION)
    finally:
        env.close()


REPO = Path(__file__).resolve().parents[2]
STOP_BOUND_S = 60.0
"""What the issue asks: the run stops within 60 s. Measured through the console script on a 2-core machine:
14.9-17.3 s with the machine's other work (load average 4-6), of which 4-5 s are Python's start and imports,
3 s the run's set-up, and 4 x 2.3 s the four timeouts with their restarts; 21.6-30.5 s with one or two busy
loops beside it as well (the start and imports alone then take 9.4 s)."""


@pytest.mark.parametrize("env_id", ["HangingCartPole-v0", "LateHangingCartPole-v0"])
def test_a_run_whose_env_always_hangs_stops_within_a_minute_with_one_line(tmp_path, env_id) -> None:
    env_id = f"tests.hanging_env:{env_id}"  # as the user wrote it, module and all
    script = Path(sys.executable).parent / "rlpipe"
    start = time.monotonic()
    done = subprocess.run([str(script), "train", "cartpole-dqn", f"env.env_id={env_id}", "env.asynchronous=true",
                           "env.step_timeout=2", "run.progress=false", "--run-dir", str(tmp_path / "run")],
                          cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
                          timeout=2 * STOP_BOUND_S)
    elapsed = time.monotonic() - start
    err = done.stderr.strip().splitlines()
    print(f"{env_id}: stopped after {elapsed:.1f} s; stderr:", *err, sep="\n")
    assert done.returncode == 2 and not any("Traceback" in line for line in err)
    assert len([line for line in err if line.startswith("rlpipe train: error:")]) == 1
    assert err[-1].startswith(f"rlpipe train: error: {env_id}: its worker processes failed 4 times with no episode "
                              "finished between") and "step timeout of 2.0 s" in err[-1]
    assert len(err) <= 2 and all("restarting them" in line for line in err[:-1])  # the first restart is logged
    assert elapsed < STOP_BOUND_S
