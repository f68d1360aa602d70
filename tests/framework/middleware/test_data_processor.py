"""data_pusher, nstep_reward_enhancer and offpolicy_data_fetcher inside real task iterations."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from rlpipe.config import Config
from rlpipe.data import DequeBuffer, PriorityExperienceReplay
from rlpipe.framework import OnlineRLContext, task
from rlpipe.framework.middleware.functional import data_pusher, nstep_reward_enhancer, offpolicy_data_fetcher


def config(batch_size=4, unroll_len=1, priority=False, nstep=1) -> Config:
    cfg = Config()
    cfg.policy.learn.batch_size = batch_size
    cfg.policy.collect.unroll_len = unroll_len
    cfg.policy.priority = priority
    cfg.policy.nstep = nstep
    cfg.policy.discount_factor = 0.5
    return cfg


def steps(n_steps: int, n_envs: int = 2, start: int = 0, tag: int = 0) -> dict[str, np.ndarray]:
    """Vector-env rows: step-major, envs contiguous; `action` numbers the row, `tag` marks the source."""
    n = n_steps * n_envs
    t = np.repeat(np.arange(start, start + n_steps), n_envs)
    return {
        "obs": t[:, None].astype(np.float32),
        "next_obs": t[:, None].astype(np.float32) + 1,
        "action": np.arange(start * n_envs, start * n_envs + n, dtype=np.int64),
        "reward": np.ones(n, dtype=np.float32),
        "terminated": np.zeros(n, dtype=bool),
        "truncated": np.zeros(n, dtype=bool),
        "env_id": np.tile(np.arange(n_envs), n_steps),
        "tag": np.full(n, tag),
    }


def test_pusher_pushes_trajectories_in_one_batch_and_episodes_one_each() -> None:
    buf = DequeBuffer(100)
    calls = []
    buf.use(lambda action, chain, *a, **k: calls.append(action) or chain(*a, **k))
    ctx = OnlineRLContext(train_iter=7)
    ctx.trajectories = steps(3)
    data_pusher(config(), buf)(ctx)
    assert calls == ["push_batch"] and buf.count() == 6
    assert buf.get(0).meta == {"train_iter_data_collected": 7}
    episodes = DequeBuffer(10)
    episodes.use(lambda action, chain, *a, **k: calls.append(action) or chain(*a, **k))
    ctx = OnlineRLContext()
    ctx.episodes = [{"obs": np.zeros((3, 1))}, {"obs": np.zeros((5, 1))}]
    data_pusher(config(), episodes)(ctx)
    assert [c for c in calls if c != "get"] == ["push_batch", "push", "push"]
    assert episodes.get(-1).data["obs"].shape == (5, 1)
    data_pusher(config(unroll_len=2), buf)(OnlineRLContext(trajectories=steps(1)))
    assert buf.get(-1).meta["env"] == 1


def test_fetcher_shortage_sets_none_and_warns(caplog) -> None:
    buf = DequeBuffer(10)
    buf.push_batch(steps(1))
    fetch = task.wrap(offpolicy_data_fetcher(config(batch_size=4), buf, data_shortage_warning=True))
    ctx = OnlineRLContext()
    with caplog.at_level(logging.WARNING):
        fetch(ctx)()
    assert ctx.train_data is None
    assert "has 2 samples, need 4" in caplog.text


def test_single_buffer_batch_and_sequences() -> None:
    buf = DequeBuffer(50, seed=0)
    data_pusher(config(unroll_len=3), buf)(OnlineRLContext(trajectories=steps(5)))
    ctx = OnlineRLContext()
    task.wrap(offpolicy_data_fetcher(config(batch_size=4), buf))(ctx)()
    assert ctx.train_data["obs"].shape == (4, 1) and ctx.train_data["reward"].shape == (4,)
    task.wrap(offpolicy_data_fetcher(config(batch_size=6, unroll_len=3), buf))(ctx)()
    seq = ctx.train_data
    assert seq["obs"].shape == (6, 3, 1) and seq["action"].shape == (6, 3)
    assert (seq["env_id"] == seq["env_id"][:, :1]).all()
    np.testing.assert_array_equal(np.diff(seq["obs"][..., 0], axis=1), 1)
    # only 3 runs of 3 per env (t=0..4): 6 available, 7 is a shortage
    task.wrap(offpolicy_data_fetcher(config(batch_size=7, unroll_len=3), buf))(ctx)()
    assert ctx.train_data is None


def test_list_of_buffers_mixes_by_ratio_and_dict_gives_one_batch_per_key() -> None:
    a, b = DequeBuffer(50, seed=0), DequeBuffer(50, seed=1)
    a.push_batch(steps(10, tag=0))
    b.push_batch(steps(10, tag=1))
    ctx = OnlineRLContext()
    task.wrap(offpolicy_data_fetcher(config(batch_size=10), [(a, 0.7), (b, 0.3)]))(ctx)()
    assert ctx.train_data["obs"].shape == (10, 1)
    assert (ctx.train_data["tag"] == 0).sum() == 7 and (ctx.train_data["tag"] == 1).sum() == 3
    task.wrap(offpolicy_data_fetcher(config(batch_size=5), {"expert": a, "agent": b}))(ctx)()
    assert ctx.train_data.keys() == {"expert", "agent"}
    assert ctx.train_data["expert"]["obs"].shape == (5, 1) and (ctx.train_data["agent"]["tag"] == 1).all()
    with pytest.raises(TypeError, match="buffer_ must be"):
        offpolicy_data_fetcher(config(), 3)  # type: ignore[arg-type]


def test_weight_filled_for_uniform_source_when_mixed_with_priority() -> None:
    a, b = DequeBuffer(50, seed=0), DequeBuffer(50, seed=1)
    a.use(PriorityExperienceReplay(a))
    a.push_batch(steps(5))
    b.push_batch(steps(5))
    ctx = OnlineRLContext()
    task.wrap(offpolicy_data_fetcher(config(batch_size=4, priority=True), [(a, 0.5), (b, 0.5)]))(ctx)()
    assert ctx.train_data["weight"].shape == (4,)
    np.testing.assert_array_equal(ctx.train_data["weight"][2:], 1.0)


def _learner(cfg, buffer_, rounds, seen):
    """The contract's learner loop: fetch -> train -> back(), several batches per iteration."""
    fetch = task.wrap(offpolicy_data_fetcher(cfg, buffer_))

    def learn(ctx):
        outputs = []
        for r in range(rounds):
            back = fetch(ctx)
            if ctx.train_data is None:
                back()
                break
            batch = ctx.train_data
            # a distinct priority per row and round, so a misplaced update is visible
            ctx.train_output = {"priority": (batch["action"] * 10 + r + 1).astype(np.float32)}
            seen.append((batch["action"].copy(), ctx.train_output["priority"].copy()))
            back()
            outputs.append(ctx.train_output)
        ctx.train_output = outputs

    return learn


def test_priority_updates_land_on_each_batch_of_a_multi_batch_iteration() -> None:
    cfg = config(batch_size=8, priority=True)
    buf = DequeBuffer(64, seed=0)
    per = PriorityExperienceReplay(buf, priority_power_factor=1.0)
    buf.use(per)
    seen: list = []
    with task.start():
        task.use(lambda ctx: setattr(ctx, "trajectories", steps(8, start=8 * ctx.total_step)))
        task.use(data_pusher(cfg, buf))
        task.use(_learner(cfg, buf, rounds=3, seen=seen))
        task.use(lambda ctx: ctx.train_output[0]["priority"])  # another reader of train_output
        task.run(max_step=2)
    assert len(seen) == 6
    expected: dict[int, float] = {}
    for actions, priority in seen:
        expected.update(zip(actions.tolist(), priority.tolist(), strict=True))
    for index, priority in expected.items():  # action == index here (one push per row, in order)
        assert buf.get_by_index(index).meta["priority"] == pytest.approx(priority)
        assert per.tree.leaves(np.array([index % 64]))[0] == pytest.approx(priority + 1e-6)
    # items no batch touched keep the priority they were pushed with: the max seen so far
    first_max = max(float(p.max()) for _, p in seen[:3])
    for index in set(range(32)) - set(expected):
        assert buf.get_by_index(index).meta["priority"] == (1.0 if index < 16 else first_max)


def test_priority_update_splits_over_buffers_and_sequences() -> None:
    cfg = config(batch_size=4, priority=True, unroll_len=2)
    a, b = DequeBuffer(50, seed=0), DequeBuffer(50, seed=1)
    for buf in (a, b):
        buf.use(PriorityExperienceReplay(buf, priority_power_factor=1.0))
    data_pusher(cfg, a)(OnlineRLContext(trajectories=steps(4)))
    data_pusher(cfg, b)(OnlineRLContext(trajectories=steps(4)))
    ctx = OnlineRLContext()
    back = task.wrap(offpolicy_data_fetcher(cfg, [(a, 0.5), (b, 0.5)]))(ctx)
    assert ctx.train_data["action"].shape == (4, 2)
    rows = ctx.train_data["action"]
    ctx.train_output = {"priority": np.array([1.0, 2.0, 3.0, 4.0])}
    back()
    for buf, part, prios in ((a, rows[:2], [1.0, 2.0]), (b, rows[2:], [3.0, 4.0])):
        expected = {int(i): p for seq, p in zip(part, prios, strict=True) for i in seq}  # later wins
        assert {i: buf.get_by_index(i).meta["priority"] for i in expected} == pytest.approx(expected)
    bad = task.wrap(offpolicy_data_fetcher(cfg, a))
    back = bad(ctx)
    ctx.train_output = [{"priority": np.ones(4)}, {"priority": np.ones(4)}]
    with pytest.raises(ValueError, match="saw 2 learn outputs"):
        back()


def test_nstep_enhancer_holds_windows_across_iterations() -> None:
    cfg = config(nstep=3)
    buf = DequeBuffer(100)
    with task.start():
        task.use(lambda ctx: setattr(ctx, "trajectories", steps(2, start=2 * ctx.total_step)))
        task.use(nstep_reward_enhancer(cfg))
        task.use(data_pusher(cfg, buf))
        task.run(max_step=3)  # 6 steps per env; 4 per env have a full window
    assert buf.count() == 8
    batch = buf.sample_batch(8)
    np.testing.assert_allclose(batch.data["reward"], 1 + 0.5 + 0.25)
    np.testing.assert_allclose(batch.data["value_gamma"], 0.125)
    np.testing.assert_array_equal(batch.data["next_obs"][:, 0], batch.data["obs"][:, 0] + 3)
