"""Every built-in preset builds: its envs, policy, buffer and reward models come up (with small
buffers and one env each, so the test is quick), and the envs give the observations the policy takes."""
from __future__ import annotations

import numpy as np
import pytest

from rlpipe.config import load_config, preset_names
from rlpipe.recipes.build import build_parts

SMALL = ["env.collector_env_num=1", "env.evaluator_env_num=1", "policy.other.replay_buffer.replay_buffer_size=2000",
         "policy.random_collect_size=0", "run.progress=false"]


@pytest.mark.parametrize("preset", preset_names())
def test_the_preset_builds(preset):
    cfg = load_config(preset, SMALL)
    with build_parts(cfg) as parts:
        assert parts.policy is not None and parts.buffer.count() == 0
        assert (parts.reward_model is not None) == (cfg.reward_model is not None)
        assert (parts.her_reward_model is not None) == (cfg.policy.other.her is not None)
        env = parts.collector_env
        env.reset(seed=0)
        step = env.step(env.random_actions())
        assert step["obs"].shape[0] == 1 and np.all(np.isfinite(np.asarray(step["reward"], dtype=np.float64)))
        assert env.observation_space.contains(np.asarray(step["next_obs"])[0])
