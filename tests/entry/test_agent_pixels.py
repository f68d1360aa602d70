"""``predict`` on the stacked frames a pixel env returns: ``uint8`` stays ``uint8`` until the encoder scales it."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import rlpipe
from rlpipe.cli.main import main
from rlpipe.envs.atari import make_atari_env

pytest.importorskip("ale_py")

TINY_PONG = ["run.max_env_step=160", "policy.random_collect_size=80", "run.progress=false",
             "policy.learn.batch_size=8", "policy.other.replay_buffer.replay_buffer_size=1000",
             "env.collector_env_num=2", "env.evaluator_env_num=1", "env.n_evaluator_episode=1",
             "env.atari.max_episode_steps=50", "policy.eval.evaluator.eval_freq=100000"]


def test_predict_takes_the_envs_frame_stacks_and_scales_them_as_training_does(tmp_path):
    run_dir = tmp_path / "pong"
    assert main(["train", "pong-dqn", *TINY_PONG, "--run-dir", str(run_dir)]) == 0
    agent = rlpipe.load(run_dir)
    env = make_atari_env("ALE/Pong-v5", train=False)
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
