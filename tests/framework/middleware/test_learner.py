"""The seed's learner contract, with a recording policy and the real buffer."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from rlpipe.data import DequeBuffer
from rlpipe.framework import OnlineRLContext, task
from rlpipe.framework.middleware import HERLearner, OffPolicyLearner, online_logger
from rlpipe.utils.metrics import MetricsWriter, read_metrics

from .conftest import RecordingLearner


def make_cfg(update_per_collect=3, batch_size=4, priority=False, random_collect_size=0):
    return SimpleNamespace(seed=0, policy=SimpleNamespace(
        priority=priority, random_collect_size=random_collect_size,
        learn=SimpleNamespace(update_per_collect=update_per_collect, batch_size=batch_size),
        collect=SimpleNamespace(unroll_len=1),
    ))


def filled_buffer(n):
    buffer = DequeBuffer(size=100)
    buffer.push_batch({
        "obs": np.arange(n, dtype=np.float32)[:, None],
        "action": np.zeros(n, dtype=np.int64),
        "reward": np.arange(n, dtype=np.float32),
        "next_obs": np.arange(n, dtype=np.float32)[:, None],
        "terminated": np.zeros(n, dtype=bool),
        "truncated": np.zeros(n, dtype=bool),
    })
    return buffer


def test_learner_trains_update_per_collect_times_and_lists_outputs():
    policy = RecordingLearner(losses=[1.0, 2.0, 3.0])
    learner = OffPolicyLearner(make_cfg(), policy, filled_buffer(10))
    ctx = OnlineRLContext()
    learner(ctx)
    assert len(policy.batches) == 3 and ctx.train_iter == 3
    assert [o["total_loss"] for o in ctx.train_output] == [1.0, 2.0, 3.0]
    assert all(len(b["reward"]) == 4 for b in policy.batches)


def test_learner_stops_early_without_data():
    policy = RecordingLearner()
    learner = OffPolicyLearner(make_cfg(), policy, filled_buffer(3))  # fewer than batch_size
    ctx = OnlineRLContext()
    learner(ctx)
    assert policy.batches == [] and ctx.train_output == [] and ctx.train_iter == 0


def test_learners_wait_while_the_collector_says_the_warm_up_goes_on():
    """A long warm-up reaches the buffer over several collections (``ctx.warming_up``); nothing
    trains before its end. Without the flag a learner trains whatever ``ctx.env_step`` says, as the
    seed's does (its users may drive it without rlpipe's collectors)."""
    from rlpipe.reward_model import HerRewardModel

    her = HerRewardModel(SimpleNamespace(her_strategy="future", her_replay_k=1, episode_size=2,
                                         sample_per_episode=None))
    for make in (lambda cfg, policy: OffPolicyLearner(cfg, policy, filled_buffer(10)),
                 lambda cfg, policy: HERLearner(cfg, policy, filled_buffer(10), her)):
        policy = RecordingLearner()
        learner = make(make_cfg(random_collect_size=50), policy)
        ctx = OnlineRLContext()
        ctx.warming_up = True
        learner(ctx)
        assert policy.batches == [] and ctx.train_output == [] and ctx.train_iter == 0
    learner = OffPolicyLearner(make_cfg(random_collect_size=50), policy, filled_buffer(10))
    ctx = OnlineRLContext()  # env_step 0 < random_collect_size, but no collector said so
    learner(ctx)
    assert len(policy.batches) == 3 and ctx.train_iter == 3


def test_learner_trains_on_batch_returned_by_reward_model():
    class AddTen:
        def estimate(self, batch):
            return {**batch, "reward": batch["reward"] + 10}

    policy = RecordingLearner()
    OffPolicyLearner(make_cfg(update_per_collect=2), policy, filled_buffer(10), reward_model=AddTen())(
        OnlineRLContext())
    assert all(np.all(b["reward"] >= 10) for b in policy.batches)


def test_learner_output_survives_a_logger_in_the_same_pipeline(tmp_path):
    policy = RecordingLearner()
    writer = MetricsWriter(tmp_path, tensorboard=False)
    task.use(OffPolicyLearner(make_cfg(update_per_collect=2), policy, filled_buffer(10)))
    task.use(online_logger(writer, train_show_freq=1))
    seen = []
    task.use(lambda ctx: seen.append(list(ctx.train_output)))
    task.run(max_step=1)
    writer.close()
    assert [out["total_loss"] for out in seen[0]] == [0.5, 0.5]
    assert all(out["priority"].shape == (4,) for out in seen[0])
    train_records = [r for r in read_metrics(tmp_path) if r["kind"] == "train"]
    assert train_records == [{"kind": "train", "env_step": 0, "train_iter": 2, "total_loss": 0.5}]


def test_her_learner_contract():

    cfg = make_cfg(update_per_collect=2, batch_size=2)
    cfg.policy.other = SimpleNamespace(her=None)
    episode = {k: v[:3] for k, v in {
        "obs": np.zeros((3, 4), dtype=np.float32), "action": np.zeros(3, dtype=np.int64),
        "reward": np.zeros(3, dtype=np.float32), "next_obs": np.zeros((3, 4), dtype=np.float32),
        "terminated": np.zeros(3, dtype=bool), "truncated": np.array([False, False, True])}.items()}
    from rlpipe.reward_model import HerRewardModel

    her = HerRewardModel(SimpleNamespace(her_strategy="future", her_replay_k=1, episode_size=2,
                                         sample_per_episode=None))
    buffer = DequeBuffer(size=10)
    policy = RecordingLearner()
    learner = HERLearner(cfg, policy, buffer, her)
    ctx = OnlineRLContext()
    learner(ctx)
    assert ctx.train_output == [] and policy.batches == []
    buffer.push(episode)
    buffer.push(episode)
    learner(ctx)
    assert len(ctx.train_output) == 2 and ctx.train_iter == 2
    assert all(len(b["reward"]) >= 6 for b in policy.batches)
