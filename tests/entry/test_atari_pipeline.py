"""Pong through build_parts and the training pipeline: what the buffer holds (frames kept once,
stacks rebuilt) is what the envs returned, row for row: stacks, rewards and episode ends."""
from __future__ import annotations

import json

import numpy as np
import pytest

from rlpipe.config import load_config
from rlpipe.data import FrameStore
from rlpipe.entry import train
from rlpipe.framework import Task
from rlpipe.recipes.build import build_parts
from rlpipe.recipes.pipeline import use_training_pipeline

pytest.importorskip("ale_py")

FIELDS = ("obs", "next_obs", "reward", "terminated", "truncated", "env_id")
PONG = [
    "run.max_env_step=2400", "run.progress=false", "policy.random_collect_size=1200",
    "env.collector_env_num=2", "policy.collect.n_sample=16", "policy.learn.update_per_collect=1",
    "policy.learn.batch_size=8", "policy.other.replay_buffer.replay_buffer_size=4000",
    "env.evaluator_env_num=1", "env.n_evaluator_episode=1", "policy.eval.evaluator.eval_freq=100000",
    # short episodes, so that the run has many ends (truncated here: a Pong game takes ~800 steps)
    "env.atari={max_episode_steps: 250}",
]


def test_pong_rows_in_the_buffer_are_the_envs_own():
    cfg = load_config("pong-dqn", PONG)
    recorded: list[dict[str, np.ndarray]] = []

    def record(ctx) -> None:  # after the pusher: the rows it pushed, as the collector got them from the envs
        if ctx.trajectories is not None:
            recorded.append({key: np.array(ctx.trajectories[key]) for key in FIELDS})

    with build_parts(cfg) as parts:
        chain = [type(m).__name__ for m in parts.buffer.middleware]
        assert chain == ["FrameStore"]  # on by itself for an ALE game's stacks
        assert parts.cfg.policy.model.obs_dtype == "uint8" and parts.cfg.policy.model.obs_high == 255
        task = use_training_pipeline(Task(), parts, {"after_collect": [record]})
        task.run()
        store = parts.buffer.middleware[0]
        assert isinstance(store, FrameStore)
        rows = {key: np.concatenate([r[key] for r in recorded]) for key in FIELDS}
        n = len(rows["reward"])
        assert parts.buffer.count() == n >= 2300 and store.evicted == 0
        assert task.ctx.train_iter >= 70  # learning ran: one update per 16-step iteration after the random steps

        stored = parts.buffer.sample_batch(0, indices=np.arange(n)).data
        for key in FIELDS[:-1]:
            np.testing.assert_array_equal(np.asarray(stored[key]), rows[key], err_msg=key)
        assert stored["obs"].dtype == np.uint8 and stored["obs"].shape == (n, 4, 84, 84)
        assert store.ring.next_id < 1.1 * n  # about one frame per transition, not eight

    # the rows are the envs' own: each env's stacks shift by one frame a step, and start zero-padded
    assert set(np.unique(rows["reward"])) <= {-1.0, 0.0, 1.0} and (rows["reward"] != 0).any()
    assert rows["truncated"].sum() >= 8 and not rows["terminated"].any()
    for env in (0, 1):
        mine = {key: value[rows["env_id"] == env] for key, value in rows.items()}
        obs, next_obs = mine["obs"], mine["next_obs"]
        np.testing.assert_array_equal(next_obs[:, :3], obs[:, 1:])
        ended = mine["terminated"] | mine["truncated"]
        go_on = ~ended[:-1]
        np.testing.assert_array_equal(obs[1:][go_on], next_obs[:-1][go_on])
        starts = obs[1:][ended[:-1]]
        assert len(starts) >= 4 and not starts[:, :3].any() and starts[:, 3].any()


def test_resume_rebuilds_the_frame_store_and_loads_its_frames(tmp_path):
    short = [*PONG[1:], "run.max_env_step=600", "policy.random_collect_size=300", "run.save_freq=5"]
    run = tmp_path / "run"
    train(load_config("pong-dqn", short), run)
    saved = []
    train(load_config("pong-dqn", [*short, "run.max_env_step=900"]), run, resume=True,
          middleware={"before_collect": [lambda ctx: saved.append(ctx.env_step)]})
    assert saved[0] >= 592  # it went on from the checkpoint, its buffer loaded into a new frame store
    assert json.loads((run / "summary.json").read_text())["env_step"] >= 900
