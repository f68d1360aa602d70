"""Every built-in preset builds: its envs, policy, buffer and reward models come up (with small
buffers and one env each, so the test is quick), and the envs give the observations the policy takes.
A preset that learns from a dataset gets a small one made here (random play on its env)."""
from __future__ import annotations

import numpy as np
import pytest

from rlpipe.config import load_config, preset_names
from rlpipe.recipes.build import build_parts
from rlpipe.tools.datasets import rollout_dataset

SMALL = ["env.collector_env_num=1", "env.evaluator_env_num=1", "policy.other.replay_buffer.replay_buffer_size=2000",
         "policy.random_collect_size=0", "run.progress=false"]


@pytest.mark.parametrize("preset", preset_names())
def test_the_preset_builds(preset, tmp_path):
    overrides = list(SMALL)
    offline = load_config(preset).offline
    if offline is not None:  # two episodes where the preset scales rewards by the returns' range
        episodes = 1 if offline.return_range is None else 2
        dataset = rollout_dataset(preset, tmp_path / "data", episodes=episodes, random_actions=True, num_envs=1)
        overrides.append(f"offline.dataset={dataset.path}")
    cfg = load_config(preset, overrides)
    with build_parts(cfg) as parts:
        assert parts.policy is not None
        assert (parts.reward_model is not None) == (cfg.reward_model is not None)
        assert (parts.her_reward_model is not None) == (cfg.policy.other.her is not None)
        collects = cfg.offline is None or cfg.offline.online
        assert parts.buffer.count() == (0 if collects else parts.dataset.count())
        assert (parts.dataset is not None) == (cfg.offline is not None)
        env = parts.collector_env if collects else parts.evaluator_env
        env.reset(seed=0)
        step = env.step(env.random_actions())
        assert step["obs"].shape[0] == 1 and np.all(np.isfinite(np.asarray(step["reward"], dtype=np.float64)))
        assert env.observation_space.contains(np.asarray(step["next_obs"])[0])
