"""Acting with memory: the collector records the state each env acted from, resets it exactly where
the env's episode starts, and keeps its states apart from the evaluator's."""
from __future__ import annotations

import numpy as np
import torch

from rlpipe.config import load_config
from rlpipe.data.buffer.sequence_columns import CORE_STATE, INITIAL_TD
from rlpipe.framework import OnlineRLContext
from rlpipe.framework.middleware import StepCollector
from rlpipe.framework.middleware.functional.evaluator import evaluate_episodes
from rlpipe.recipes.build import make_policy
from rlpipe.recipes.envs import make_vector_env
from rlpipe.utils.batch import concat_batches

# CartPole's episodes are short under random actions, so several end inside 60 vector steps
CONFIG = ["env.env_id=CartPole-v1", "env.collector_env_num=3", "policy.model.core_hidden=8",
          "policy.model.obs_shape=4", "policy.model.action_shape=2",
          "policy.collect.n_sample=180", "policy.random_collect_size=0"]


def collected(seed: int = 0, *overrides: str):
    cfg = load_config("popgym-repeatprevious-r2d2", [*CONFIG, *overrides])
    torch.manual_seed(seed)
    policy = make_policy(cfg)
    env = make_vector_env(cfg, 3, seed, train=True)
    ctx = OnlineRLContext()
    ctx.collect_kwargs["eps"] = 1.0  # random actions, the network still steps
    collector = StepCollector(cfg, policy.collect_mode, env)
    collector(ctx)
    rows = ctx.trajectories
    collector.release(ctx)  # the held vector step too
    env.close()
    return policy, concat_batches([rows, ctx.trajectories])


def test_each_row_holds_the_state_its_env_acted_from_reset_at_episode_starts():
    policy, rows = collected()
    env_id, state = rows["env_id"], rows[CORE_STATE]
    assert state.shape == (len(env_id), 8) and state.dtype == np.float32
    starts = 0
    for e in range(3):
        mine = np.flatnonzero(env_id == e)
        ends = rows["terminated"][mine] | rows["truncated"][mine]
        assert ends[:-1].any(), "no episode ended: the test needs longer collections"
        episode_start = np.concatenate([[True], ends[:-1]])
        starts += int(episode_start.sum())
        np.testing.assert_array_equal(state[mine][episode_start], 0.0)  # a fresh state at each episode's start
        assert np.abs(state[mine][~episode_start]).sum(axis=1).min() > 0  # and a remembered one elsewhere
        with torch.no_grad():  # the next row's state is the network's step from this row's
            _, after = policy.model.step(torch.as_tensor(rows["obs"][mine]), torch.as_tensor(state[mine]))
        inside = ~ends[:-1]
        np.testing.assert_allclose(state[mine][1:][inside], after.numpy()[:-1][inside], rtol=1e-5, atol=1e-6)
    assert starts > 3


def test_evaluating_leaves_the_collectors_states_as_they_were():
    policy, _ = collected()
    memory = policy.collect_mode.memory
    memory.begin(np.zeros(3, dtype=bool))  # no env starts an episode: the states stay
    before = memory.stored()
    assert np.abs(before).sum() > 0
    cfg = load_config("popgym-repeatprevious-r2d2", CONFIG)
    env = make_vector_env(cfg, 2, 7)
    output = evaluate_episodes(policy.eval_mode, env, 4)
    env.close()
    assert len(output["episode_return"]) == 4 and policy.eval_mode.memory is not memory
    memory.begin(np.zeros(3, dtype=bool))
    np.testing.assert_array_equal(memory.stored(), before)


def test_with_initial_priority_each_row_carries_its_td_error_from_the_state_it_acted_from():
    policy, rows = collected(0, "policy.collect.initial_priority=true")
    td = rows[INITIAL_TD]
    assert td.shape == rows["reward"].shape and td.dtype == np.float32 and (td > 0).all()
    np.testing.assert_allclose(td, policy.initial_td(rows), rtol=1e-5, atol=1e-7)  # each row's own state and step
    fresh = policy.initial_td({**rows, CORE_STATE: np.zeros_like(rows[CORE_STATE])})
    assert not np.allclose(td, fresh)  # ... which the estimate reads
    assert INITIAL_TD not in collected(0)[1]  # off by default
