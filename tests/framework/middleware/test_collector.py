from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from rlpipe.envs import RecreateOnError, VectorEnvManager
from rlpipe.framework import OnlineRLContext
from rlpipe.framework.middleware import EpisodeCollector, StepCollector
from rlpipe.framework.middleware import collector as collector_module
from rlpipe.utils.batch import batch_nbytes, concat_batches

from .conftest import ConstantActor, FailsOnce, env_factory


def cfg(n_sample=None, n_episode=None, **policy):
    return SimpleNamespace(policy=SimpleNamespace(collect=SimpleNamespace(n_sample=n_sample, n_episode=n_episode),
                                                  **policy))


def test_step_collector_collects_whole_vector_steps_in_time_order(cartpole_env):
    actor = ConstantActor()
    collector = StepCollector(cfg(n_sample=7), actor, cartpole_env)
    ctx = OnlineRLContext()
    ctx.collect_kwargs["eps"] = 0.3
    collector(ctx)
    traj = ctx.trajectories
    assert ctx.env_step == 9  # ceil(7 / 3) vector steps of 3 envs
    assert len(traj["reward"]) == 6  # the newest vector step is held until the next one
    assert traj["env_id"].tolist() == [0, 1, 2] * 2
    # each env's obs continues from its previous next_obs (no episode can end within 3 steps)
    np.testing.assert_array_equal(traj["obs"][3:], traj["next_obs"][:-3])
    assert actor.kwargs == [{"eps": 0.3}] * 3
    held_next_obs = traj["next_obs"][3:]
    collector(ctx)
    np.testing.assert_array_equal(ctx.trajectories["obs"][:3], held_next_obs)  # the held step comes next
    assert len(ctx.trajectories["reward"]) == 9
    assert traj["terminated"].dtype == bool and traj["truncated"].dtype == bool


def test_step_collector_random_phase_reaches_random_collect_size(cartpole_env):
    actor = ConstantActor()
    collector = StepCollector(cfg(n_sample=3), actor, cartpole_env, random_collect_size=20)
    ctx = OnlineRLContext()
    collector(ctx)
    assert ctx.env_step == 21 and actor.kwargs == []
    collector(ctx)
    assert ctx.env_step == 24 and len(actor.kwargs) == 1


def test_a_warm_up_with_the_policys_actions_acts_with_it_and_still_holds_the_learners_back(cartpole_env):
    """``policy.warm_up_actions: policy``: the same warm-up length, every action the policy's."""
    actor = ConstantActor()
    collector = StepCollector(cfg(n_sample=3, warm_up_actions="policy"), actor, cartpole_env, random_collect_size=20)
    ctx = OnlineRLContext()
    collector(ctx)
    assert ctx.env_step == 21 and len(actor.kwargs) == 7 and not ctx.warming_up
    assert np.all(ctx.trajectories["action"] == 0)  # the actor's action; random ones would differ


def test_an_episode_collectors_warm_up_acts_as_the_config_says(cartpole_env):
    calls, steps = {}, {}
    for mode in ("random", "policy"):
        actor, ctx = ConstantActor(), OnlineRLContext()
        EpisodeCollector(cfg(n_episode=1, warm_up_actions=mode), actor, cartpole_env, random_collect_size=30)(ctx)
        calls[mode], steps[mode] = len(actor.kwargs), ctx.env_step // 3
    assert calls["policy"] == steps["policy"]  # every vector step
    assert calls["random"] == steps["random"] - 10  # all but the warm-up's 10 vector steps of 3 envs


def test_a_long_warm_up_is_handed_on_in_pieces_of_bounded_size(monkeypatch):
    """Each warm-up collection stops once it holds WARM_UP_CHUNK_BYTES; the pieces together are
    the transitions one collection of the whole warm-up gives (same env seed)."""
    def collect_warm_up(chunk_bytes):
        monkeypatch.setattr(collector_module, "WARM_UP_CHUNK_BYTES", chunk_bytes)
        env = VectorEnvManager(env_factory("CartPole-v1"), num_envs=3, seed=0)
        collector = StepCollector(cfg(n_sample=3), ConstantActor(), env, random_collect_size=60)
        ctx, pieces, flags = OnlineRLContext(), [], []
        while ctx.env_step < 60:
            collector(ctx)
            pieces.append(ctx.trajectories)
            flags.append(ctx.warming_up)
        env.close()
        assert flags == [True] * (len(flags) - 1) + [False]  # the learners wait for the last piece
        return pieces

    whole = collect_warm_up(2**40)
    step_bytes = batch_nbytes({key: value[:3] for key, value in whole[0].items()})  # one vector step
    pieces = collect_warm_up(4 * step_bytes)
    assert len(whole) == 1 and len(pieces) == 5  # 20 vector steps, the first piece one short (the held step)
    assert all(batch_nbytes(piece) == 4 * step_bytes for piece in pieces[:-1])
    joined = concat_batches(pieces)
    assert joined.keys() == whole[0].keys()
    for key in joined:
        np.testing.assert_array_equal(joined[key], whole[0][key])


def test_step_collector_stops_at_the_first_vector_step_that_reaches_max_env_step(cartpole_env):
    collector = StepCollector(cfg(n_sample=12), ConstantActor(), cartpole_env, random_collect_size=10, max_env_step=16)
    ctx = OnlineRLContext()
    collector(ctx)
    assert ctx.env_step == 12  # the warm-up and n_sample, both under the cap
    collector(ctx)
    assert ctx.env_step == 18  # 16 is reached within the second of 3-env vector steps, not after 4
    collector(ctx)
    assert ctx.env_step == 18


def test_episode_collector_stops_at_max_env_step_with_the_episodes_finished_by_then(cartpole_env):
    ctx = OnlineRLContext()
    EpisodeCollector(cfg(n_episode=50), ConstantActor(), cartpole_env, max_env_step=30)(ctx)
    assert ctx.env_step == 30 and len(ctx.episodes) == ctx.env_episode < 50


def test_step_collector_marks_episode_ends_and_keeps_final_obs(cartpole_env):
    collector = StepCollector(cfg(n_sample=300), ConstantActor(), cartpole_env)
    ctx = OnlineRLContext()
    collector(ctx)
    traj = ctx.trajectories
    ends = np.flatnonzero(traj["terminated"])
    assert len(ends) > 0 and 0 <= ctx.env_episode - len(ends) <= 3  # episodes may end in the held step
    # always pushing left, the pole falls: the final next_obs is out of bounds, not a reset state
    assert np.all(np.abs(traj["next_obs"][ends, 2]) > 0.2)
    after = ends + 3
    after = after[after < len(traj["reward"])]
    assert np.all(np.abs(traj["obs"][after, 2]) < 0.06)  # the next obs of that env is a fresh reset


def test_episode_collector_returns_whole_episodes_and_carries_over(cartpole_env):
    collector = EpisodeCollector(cfg(n_episode=4), ConstantActor(), cartpole_env)
    ctx = OnlineRLContext()
    collector(ctx)
    first = ctx.episodes
    assert len(first) >= 4 and ctx.env_episode == len(first)
    for ep in ctx.episodes:
        assert ep["terminated"][-1] and not ep["terminated"][:-1].any()
        np.testing.assert_array_equal(ep["obs"][1:], ep["next_obs"][:-1])
        assert len(np.unique(ep["env_id"])) == 1
    collector(ctx)
    both = first + ctx.episodes
    assert ctx.env_episode == len(both)
    # every finished step is in exactly one episode; the rest belong to running episodes
    finished_steps = sum(len(ep["reward"]) for ep in both)
    assert ctx.env_step - 3 * 200 < finished_steps <= ctx.env_step


def test_episode_collector_ends_an_episode_before_its_failed_step(monkeypatch):
    monkeypatch.setattr(FailsOnce, "made", 0)
    env = VectorEnvManager(lambda: RecreateOnError(FailsOnce), num_envs=1, seed=0)
    ctx = OnlineRLContext()
    EpisodeCollector(cfg(n_episode=2), ConstantActor(), env)(ctx)
    failed, whole = ctx.episodes
    assert "env_error" not in failed and failed["obs"][:, 0].tolist() == [0, 1]
    assert failed["truncated"].tolist() == [False, True] and failed["next_obs"][-1, 0] == 2
    assert len(whole["reward"]) == 5 and ctx.env_step == 8  # the failed step still counts as a step


def test_step_collector_drops_a_failed_step_and_truncates_the_step_before_across_calls(monkeypatch):
    monkeypatch.setattr(FailsOnce, "made", 0)
    env = VectorEnvManager(lambda: RecreateOnError(FailsOnce), num_envs=1, seed=0)
    collector = StepCollector(cfg(n_sample=1), ConstantActor(), env)
    ctx = OnlineRLContext()
    written = []
    for _ in range(6):  # one vector step per call: the failure (3rd step) comes a call after the step before
        collector(ctx)
        if ctx.trajectories is not None:
            written.append(ctx.trajectories)
    rows = {key: np.concatenate([t[key] for t in written]) for key in written[0]}
    assert "env_error" not in rows
    assert rows["obs"][:, 0].tolist() == [0, 1, 0, 1]  # steps 1, 2 of the broken episode, then a new one
    assert rows["truncated"].tolist() == [False, True, False, False]
    assert rows["next_obs"][1, 0] == 2  # the last good observation, to bootstrap from
    assert ctx.env_step == 6
