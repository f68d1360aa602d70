"""Learning test: a ``Discrete`` observation space (FrozenLake) trains with cartpole-dqn's settings and no wrapper."""
from __future__ import annotations

import gymnasium as gym
import pytest

from rlpipe.config import load_config
from rlpipe.entry import train
from rlpipe.entry.agent import load

pytestmark = pytest.mark.slow

FROZEN_LAKE = ["env.env_id=FrozenLake-v1", "env.env_kwargs={is_slippery: false, map_name: 4x4}", "env.stop_value=1.0"]


def test_dqn_walks_the_deterministic_frozen_lake_one_hot(tmp_path):
    # with cartpole-dqn's settings (its epsilon schedule included), 1.0 was first reached at
    # 1,056-2,496 env steps over seeds 0-2 (seed 0: 2,496): 8,000 leave a 3x margin
    cfg = load_config("cartpole-dqn", ["run.progress=false", "seed=0", "run.max_env_step=8000", *FROZEN_LAKE])
    summary = train(cfg, tmp_path / "run")
    assert summary.solved, summary
    assert summary.best_eval_return == 1.0
    agent = load(tmp_path / "run")
    env = gym.make("FrozenLake-v1", is_slippery=False, map_name="4x4")
    obs, _ = env.reset(seed=0)
    total, done = 0.0, False
    while not done:  # the greedy agent takes the env's own integer observations
        obs, reward, terminated, truncated, _ = env.step(int(agent.predict(obs)))
        total, done = total + float(reward), terminated or truncated
    assert total == 1.0
