"""``rlpipe.load(path).predict(obs)`` for every distributional type, with and without noisy networks."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import rlpipe
from rlpipe.cli.main import main

from .test_agent import COMMON

RUNS = {
    "c51": ["cartpole-c51"],
    "qrdqn": ["cartpole-qrdqn"],
    "c51-noisy": ["cartpole-c51", "policy.model.noisy=true"],
    "qrdqn-noisy": ["cartpole-qrdqn", "policy.model.noisy=true"],
}


@pytest.fixture(scope="module", params=sorted(RUNS))
def run_dir(request, tmp_path_factory):
    preset, *overrides = RUNS[request.param]
    path = tmp_path_factory.mktemp("agent") / request.param
    small = ["policy.learn.update_per_collect=2", "policy.model.encoder_hidden_size_list=[16]"]
    assert main(["train", preset, *COMMON, *small, *overrides, "--run-dir", str(path)]) == 0
    return path


def test_predict_acts_deterministically_and_explores_when_asked(run_dir):
    agent = rlpipe.load(run_dir)
    env = gym.make("CartPole-v1")
    observations = np.stack([env.reset(seed=i)[0] for i in range(5)])
    actions = agent.predict(observations)
    assert actions.shape == (5,) and all(env.action_space.contains(int(a)) for a in actions)
    for _ in range(3):
        np.testing.assert_array_equal(agent.predict(observations), actions)
    explored = agent.predict(observations, deterministic=False)
    assert explored.shape == (5,) and all(env.action_space.contains(int(a)) for a in explored)
    env.close()
