"""Continuous control through the whole pipeline: builders, collector, checkpoints, resume."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from rlpipe.cli.main import main
from rlpipe.config import ConfigError, load_config
from rlpipe.framework import OnlineRLContext
from rlpipe.framework.middleware import StepCollector
from rlpipe.policy import CrossQPolicy, DDPGPolicy, SACPolicy, TD3Policy
from rlpipe.recipes.build import build_parts
from rlpipe.utils.checkpoint import load_checkpoint

TINY = ["run.progress=false", "policy.random_collect_size=64", "policy.collect.n_sample=32",
        "policy.learn.batch_size=32", "policy.model.encoder_hidden_size_list=[32,32]",
        "policy.eval.evaluator.eval_freq=40", "env.n_evaluator_episode=2", "env.evaluator_env_num=2",
        "run.save_freq=40", "run.log_freq=10"]


@pytest.mark.parametrize(("preset", "policy_class"),
                         [("pendulum-sac", SACPolicy), ("pendulum-td3", TD3Policy), ("pendulum-ddpg", DDPGPolicy),
                          ("pendulum-crossq", CrossQPolicy)])
def test_builders_make_the_continuous_policy_with_the_envs_sizes(preset, policy_class):
    with build_parts(load_config(preset, ["seed=0"])) as parts:
        assert isinstance(parts.policy, policy_class)
        assert (parts.cfg.policy.model.obs_shape, parts.cfg.policy.model.action_shape) == (3, 1)


@pytest.mark.parametrize(("preset", "overrides", "message"), [
    ("cartpole-dqn", ["env.env_id=Pendulum-v1"], "policy.type 'dqn' needs a discrete action space; env 'Pendulum-v1'"),
    ("pendulum-sac", ["env.env_id=CartPole-v1"],
     "policy.type 'sac' needs a continuous (flat Box) action space; env 'CartPole-v1' has Discrete(2)"),
])
def test_a_policy_on_the_wrong_kind_of_action_space_is_one_line(preset, overrides, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")) as err:
        build_parts(load_config(preset, overrides))
    assert "\n" not in str(err.value)


def test_step_collector_steps_a_box_env_randomly_then_with_the_policy():
    with build_parts(load_config("pendulum-sac", ["seed=0", "env.collector_env_num=4"])) as parts:
        collector = StepCollector(parts.cfg, parts.policy.collect_mode, parts.collector_env, random_collect_size=20)
        ctx = OnlineRLContext()
        collector(ctx)  # 20 random steps (5 vector steps of 4), the last one held back
        assert ctx.env_step == 20
        random_rows = ctx.trajectories
        collector(ctx)  # 8 steps with the policy's sampled actions
        assert ctx.env_step == 28
        for rows in (random_rows, ctx.trajectories):
            assert rows["action"].dtype == np.float32 and rows["action"].shape[1:] == (1,)
            assert np.abs(rows["action"]).max() <= 1.0


@pytest.mark.parametrize("preset", ["pendulum-sac", "pendulum-crossq"])
def test_checkpoint_holds_the_whole_policy_and_resume_continues(tmp_path, preset):
    run_dir = tmp_path / "run"
    assert main(["train", preset, *TINY, "run.max_env_step=256", "--run-dir", str(run_dir)]) == 0
    first = json.loads((run_dir / "summary.json").read_text())
    assert first["updates_per_env_step"] == 1.0
    final = load_checkpoint(run_dir / "ckpt" / "final.pth.tar")
    with build_parts(load_config(run_dir / "config.yaml")) as parts:
        parts.policy.load_state_dict(final["policy"])
        obs = torch.zeros(2, 3).numpy()
        restored = parts.policy.eval_mode.forward(obs)
    assert restored.shape == (2, 1) and np.abs(restored).max() <= 1.0
    assert main(["resume", str(run_dir), "run.max_env_step=512", "run.progress=false"]) == 0
    second = json.loads((run_dir / "summary.json").read_text())
    assert second["env_step"] >= 512 and second["train_iter"] > first["train_iter"]


@pytest.mark.parametrize(("preset", "sizes"), [("halfcheetah-sac", (17, 6)), ("hopper-sac", (11, 3)),
                                               ("halfcheetah-td3", (17, 6)), ("hopper-crossq", (11, 3))])
def test_mujoco_presets_build_and_collect(preset, sizes):
    overrides = ["env.evaluator_env_num=1", "policy.other.replay_buffer.replay_buffer_size=1000"]
    with build_parts(load_config(preset, overrides)) as parts:
        assert (parts.cfg.policy.model.obs_shape, parts.cfg.policy.model.action_shape) == sizes
        ctx = OnlineRLContext()
        StepCollector(parts.cfg, parts.policy.collect_mode, parts.collector_env)(ctx)
        assert ctx.trajectories["obs"].shape[1:] == (sizes[0],) and ctx.env_step == 8
