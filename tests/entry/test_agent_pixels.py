"""``predict`` on the stacked frames a pixel env returns: ``uint8`` stays ``uint8`` until the encoder scales it."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import rlpipe
from rlpipe.cli.main import main
from rlpipe.envs.atari import make_atari_env
from rlpipe.recipes.envs import make_env_factory

TINY_PONG = ["run.max_env_step=160", "policy.random_collect_size=80", "run.progress=false",
             "policy.learn.batch_size=8", "policy.other.replay_buffer.replay_buffer_size=1000",
             "env.collector_env_num=2", "env.evaluator_env_num=1", "env.n_evaluator_episode=1",
             "env.atari.max_episode_steps=50", "policy.eval.evaluator.eval_freq=100000"]


def test_predict_takes_the_envs_frame_stacks_and_scales_them_as_training_does(tmp_path):
    pytest.importorskip("ale_py")
    run_dir = tmp_path / "pong"
    assert main(["train", "pong-dqn", *TINY_PONG, "--run-dir", str(run_dir)]) == 0
    agent = rlpipe.load(run_dir)
    env = make_atari_env("ALE/Pong-v5")
    frames = [env.reset(seed=0)[0]]
    for _ in range(7):
        frames.append(env.step(env.action_space.sample())[0])
    env.close()
    batch = np.stack(frames)
    assert batch.dtype == np.uint8 and batch.shape == (8, 4, 84, 84)
    with torch.no_grad():  # what the policy computes on the frames as the buffer holds them
        expected = agent.policy.model(torch.as_tensor(batch)).argmax(-1).numpy()
    np.testing.assert_array_equal(agent.predict(batch), expected)
    assert agent.predict(frames[0]) == expected[0]


TINY_MINATAR = ["run.max_env_step=200", "run.progress=false", "policy.random_collect_size=64",
                "policy.learn.batch_size=16", "policy.other.replay_buffer.replay_buffer_size=1000",
                "env.evaluator_env_num=1", "env.n_evaluator_episode=1", "policy.eval.evaluator.eval_freq=100000"]


def test_predict_takes_minatar_observations_channels_first_as_the_env_returns_them(tmp_path):
    pytest.importorskip("minatar")
    run_dir = tmp_path / "minatar"
    assert main(["train", "minatar-breakout-dqn", *TINY_MINATAR, "--run-dir", str(run_dir)]) == 0
    agent = rlpipe.load(run_dir)
    env = make_env_factory(agent.cfg)()
    observations = [env.reset(seed=0)[0]]
    for _ in range(5):
        observations.append(env.step(env.action_space.sample())[0])
    env.close()
    batch = np.stack(observations)
    assert batch.dtype == np.uint8 and batch.shape == (6, 4, 10, 10)  # Breakout's 4 channels, first
    assert agent.observation_space.shape == (4, 10, 10)
    with torch.no_grad():
        expected = agent.policy.model(torch.as_tensor(batch)).argmax(-1).numpy()
    np.testing.assert_array_equal(agent.predict(batch), expected)
    assert agent.predict(observations[0]) == expected[0]
    with pytest.raises(ValueError, match=r"shape \(4, 10, 10\)"):
        agent.predict(observations[0].transpose(1, 2, 0))  # minatar's own channels-last layout
