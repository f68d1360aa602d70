"""NaN and infinity caught at the source: the first bad step stops the run with the env, field
and step named, or is logged, or is dropped with its episode, as ``env.nonfinite`` says."""
from __future__ import annotations

import dataclasses
import logging
from types import SimpleNamespace
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from rlpipe.envs import VectorEnvManager
from rlpipe.envs.nonfinite import NonFiniteError
from rlpipe.framework import OnlineRLContext
from rlpipe.framework.middleware import StepCollector, evaluate_episodes

ALWAYS_LEFT = SimpleNamespace(forward=lambda obs: np.zeros(len(obs), dtype=np.int64))


class Poisoned(gym.Env):
    """Ten-step episodes; the envs reset with an odd seed give ``value`` as their ``field`` at step 3
    of every episode (``every_episode``) or of the first only."""

    observation_space = spaces.Box(-np.inf, np.inf, shape=(2,), dtype=np.float32)
    action_space = spaces.Discrete(2)

    def __init__(self, field: str, value: float, every_episode: bool = True) -> None:
        self.field, self.value, self.poisoned, self.every_episode = field, value, False, every_episode

    def reset(self, *, seed: int | None = None, options: Any = None):
        super().reset(seed=seed)
        if seed is not None:
            self.poisoned = seed % 2 == 1
        self.t = 0
        return np.zeros(2, dtype=np.float32), {}

    def step(self, action):
        self.t += 1
        bad = self.poisoned and self.t == 3
        self.poisoned = self.poisoned and (self.every_episode or not bad)
        obs = np.full(2, self.value if bad and self.field == "obs" else self.t, dtype=np.float32)
        reward = self.value if bad and self.field == "reward" else 1.0
        return obs, reward, False, self.t >= 10, {}


def manager(field: str, value: float, reaction: str, every_episode: bool = True) -> VectorEnvManager:
    return VectorEnvManager(lambda: Poisoned(field, value, every_episode), num_envs=2, seed=0, nonfinite=reaction)


@pytest.mark.parametrize(("field", "value", "named"), [
    ("obs", np.nan, "a NaN next_obs"), ("reward", np.nan, "a NaN reward"), ("reward", np.inf, "an infinite reward"),
])
def test_raise_names_the_env_the_field_and_the_step_of_the_first_occurrence(field, value, named):
    env = manager(field, value, "raise")
    env.step(np.zeros(2, dtype=np.int64))
    env.step(np.zeros(2, dtype=np.int64))
    with pytest.raises(NonFiniteError) as err:
        env.step(np.zeros(2, dtype=np.int64))
    assert str(err.value) == (f"env 1 gave {named} at vector step 3 "
                              "(env.nonfinite=raise; 'warn' goes on, 'skip' ends such episodes)")


def test_a_nan_action_is_caught_too():
    env = VectorEnvManager(lambda: gym.make("Pendulum-v1"), num_envs=2, seed=0)
    with pytest.raises(NonFiniteError, match="the policy gave env 0 a NaN action at vector step 1 "):
        env.step(np.array([[np.nan], [0.0]], dtype=np.float32))


def test_warn_logs_once_and_goes_on(caplog):
    env = manager("reward", np.nan, "warn")
    with caplog.at_level(logging.WARNING):
        for _ in range(25):
            env.step(np.zeros(2, dtype=np.int64))
    assert env.nonfinite.caught == 3  # steps 3, 13 and 23 of env 1
    assert [r.getMessage() for r in caplog.records] == [
        "env 1 gave a NaN reward at vector step 3 (env.nonfinite=warn; logged once per field)"]


def test_skip_drops_the_step_and_ends_its_episode():
    env = manager("obs", np.nan, "skip", every_episode=False)
    cfg = SimpleNamespace(policy=SimpleNamespace(collect=SimpleNamespace(n_sample=2)))
    collector = StepCollector(cfg, ALWAYS_LEFT, env)
    ctx = OnlineRLContext()
    rows = []
    for _ in range(6):
        collector(ctx)
        if ctx.trajectories is not None:
            rows.append(ctx.trajectories)
    obs = np.concatenate([r["obs"] for r in rows] + [r["next_obs"] for r in rows])
    assert np.isfinite(obs).all() and env.nonfinite.caught == 1
    env_1 = np.concatenate([r["truncated"][r["env_id"] == 1] for r in rows])
    assert env_1[:3].tolist() == [False, True, False]  # the episode ends at its last good step (step 2)


def test_an_infinite_evaluation_return_is_not_a_return():
    env = manager("reward", np.inf, "skip", every_episode=False)
    output = evaluate_episodes(ALWAYS_LEFT, env, n_episode=4)
    assert np.isfinite(output["episode_return"]).all()  # env 1's poisoned episodes are left out


BACKENDS = {"gymnasium": "CartPole-v1", "ale_vector": "ALE/Pong-v5"}


def poison_third_step(env) -> None:
    """From now on the backend's third step gives env 1 a NaN reward (ALE rewards are never NaN: the
    backend itself is poisoned, so the wrappers every backend gets must catch it)."""
    backend, calls = env.unwrapped, []
    step = backend.step

    def poisoned(action):
        out = step(action)
        calls.append(1)
        if len(calls) == 3:
            reward = out.reward.copy()
            reward[1] = np.nan
            out = dataclasses.replace(out, reward=reward)
        return out

    backend.step = poisoned


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_backend_is_checked(backend, caplog):
    from rlpipe.envs import EnvSettings, make_vector_env

    def made(reaction: str):
        env = make_vector_env(EnvSettings(BACKENDS[backend], backend=backend, nonfinite=reaction), 2, seed=0)
        poison_third_step(env)
        return env

    def three_steps(env) -> dict:
        for _ in range(3):
            step = env.step(np.zeros(2, dtype=np.int64))
        return step

    env = made("raise")
    with pytest.raises(NonFiniteError, match="env 1 gave a NaN reward at vector step 3"):
        three_steps(env)
    env.close()
    env = made("skip")
    step = three_steps(env)
    assert step["env_error"].tolist() == [False, True] and step["truncated"][1] and step["reward"][1] == 0.0
    assert env.nonfinite.caught == 1 and env.failed_steps == 1
    env.close()
    env = made("warn")
    with caplog.at_level(logging.WARNING, logger="rlpipe.envs.nonfinite"):
        step = three_steps(env)
    assert np.isnan(step["reward"][1]) and "env 1 gave a NaN reward at vector step 3" in caplog.text
    env.close()
