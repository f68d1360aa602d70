"""The seed's API used as a DI-engine user would: transitions as dicts of torch.Tensor and a
config holding only the fields the seed's middleware read."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from rlpipe.config import ConfigError
from rlpipe.data import DequeBuffer, PriorityExperienceReplay
from rlpipe.framework import OnlineRLContext, Task
from rlpipe.framework.middleware import HERLearner, OffPolicyLearner, data_pusher
from rlpipe.reward_model import HerRewardModel


def seed_cfg(batch_size=4, update_per_collect=2):
    """Only what the seed's OffPolicyLearner, fetcher and trainer read: no priority, no seed."""
    return SimpleNamespace(policy=SimpleNamespace(
        learn=SimpleNamespace(batch_size=batch_size, update_per_collect=update_per_collect),
        collect=SimpleNamespace(unroll_len=1),
    ))


def transition(i: int) -> dict[str, torch.Tensor]:
    return {
        "obs": torch.full((4,), float(i)),
        "action": torch.tensor([i % 2]),
        "reward": torch.tensor([float(i)]),
        "next_obs": torch.full((4,), float(i + 1)),
        "done": torch.tensor(i % 5 == 4),
    }


def pushed_one_by_one(n: int, buffer: DequeBuffer | None = None) -> DequeBuffer:
    """``buffer`` (a new one by default) with ``n`` tensor transitions pushed as the seed pushes them."""
    buffer = buffer if buffer is not None else DequeBuffer(size=32, seed=0)
    for i in range(n):
        buffer.push(transition(i))
    return buffer


class SeedPolicy:
    """A learn mode that keeps what it was given and answers a priority per sample."""

    def __init__(self) -> None:
        self.batches: list = []

    def forward(self, batch):
        self.batches.append(batch)
        return {"total_loss": torch.tensor(0.5), "priority": batch["reward"].reshape(-1).abs() + 10.0}


def test_learner_trains_on_numeric_tensors_pushed_as_dicts_of_tensors():
    buffer = pushed_one_by_one(10)
    policy = SeedPolicy()
    ctx = OnlineRLContext()
    OffPolicyLearner(seed_cfg(), policy, buffer)(ctx)
    assert len(policy.batches) == 2 and len(ctx.train_output) == 2 and ctx.train_iter == 2
    batch = policy.batches[0]
    expected = {"obs": ((4, 4), torch.float32), "action": ((4, 1), torch.int64),
                "reward": ((4, 1), torch.float32), "next_obs": ((4, 4), torch.float32), "done": ((4,), torch.bool)}
    for key, (shape, dtype) in expected.items():
        assert isinstance(batch[key], torch.Tensor), key
        assert tuple(batch[key].shape) == shape and batch[key].dtype == dtype, key


def test_a_list_of_tensor_transitions_goes_through_the_pusher():
    buffer = DequeBuffer(size=32, seed=0)
    ctx = OnlineRLContext()
    ctx.trajectories = [transition(i) for i in range(6)]
    data_pusher(seed_cfg(), buffer)(ctx)
    assert buffer.count() == 6
    item = buffer.get(5)
    assert torch.equal(item.data["obs"], transition(5)["obs"]) and item.data["action"].dtype == torch.int64


def test_tensor_buffer_round_trips_through_save_and_load(tmp_path):
    buffer = DequeBuffer(size=16, seed=0)
    pushed = [buffer.push(transition(i)) for i in range(5)]
    buffer.save_data(str(tmp_path / "buffer.npz"))
    loaded = DequeBuffer(size=16, seed=0)
    loaded.load_data(str(tmp_path / "buffer.npz"))
    assert loaded.count() == 5
    for item in pushed:
        again = loaded.get_by_index(item.index).data
        for key, value in transition(item.index).items():
            assert isinstance(again[key], torch.Tensor) and again[key].dtype == value.dtype
            assert torch.equal(again[key], value)


def test_update_and_delete_of_unknown_indices_return_false_without_raising():
    buffer = DequeBuffer(size=2, seed=0)
    first = buffer.push(transition(0)).index
    buffer.push(transition(1))
    buffer.push(transition(2))  # overwrites the first: its index is stale
    assert buffer.update(first, meta={"x": 1}) is False
    assert buffer.update(999, data=transition(3)) is False
    assert buffer.update("foreign", meta={"x": 1}) is False
    buffer.delete(first)
    buffer.delete(999)
    assert buffer.count() == 2


def test_priority_replay_under_a_config_without_priority_updates_the_tree():
    buffer = DequeBuffer(size=32, seed=0)
    buffer.use(PriorityExperienceReplay(buffer, IS_weight=True, priority_power_factor=1.0))
    pushed_one_by_one(8, buffer)
    policy = SeedPolicy()
    OffPolicyLearner(seed_cfg(batch_size=4, update_per_collect=1), policy, buffer)(OnlineRLContext())
    trained = policy.batches[0]
    assert isinstance(trained["weight"], torch.Tensor) and trained["weight"].shape == (4,)  # like the rest
    for reward in trained["reward"].reshape(-1).tolist():
        item = buffer.get(int(reward))  # transition i holds reward i and is the i-th stored
        assert item.meta["priority"] == pytest.approx(reward + 10.0)
    untouched = set(range(8)) - {int(r) for r in trained["reward"].reshape(-1).tolist()}
    assert all(buffer.get(i).meta["priority"] == pytest.approx(1.0) for i in untouched)


@pytest.mark.parametrize("priority", [True, False])
def test_a_config_disagreeing_with_the_buffer_about_priority_is_refused_in_one_line(priority):
    cfg = seed_cfg()
    cfg.policy.priority = priority
    buffer = DequeBuffer(size=8)
    if not priority:
        buffer.use(PriorityExperienceReplay(buffer))
    with pytest.raises(ConfigError, match=r"config key 'policy\.priority' is") as err:
        OffPolicyLearner(cfg, SeedPolicy(), buffer)
    assert "\n" not in str(err.value)


def test_a_learner_runs_in_a_task_of_its_own():
    buffer = pushed_one_by_one(10)
    policy = SeedPolicy()
    task = Task()
    task.use(OffPolicyLearner(seed_cfg(), policy, buffer))
    task.use(lambda ctx: setattr(ctx, "finish", ctx.train_iter >= 6))
    task.run()
    assert task.ctx.train_iter == 6 and len(policy.batches) == 6


def test_her_learner_relabels_tensor_episodes_under_the_minimal_config():
    def episode(length: int) -> dict[str, torch.Tensor]:
        states = torch.arange(length + 1, dtype=torch.float32)[:, None]  # a 1-d state counting steps
        goal = torch.full((length + 1, 1), -1.0)  # never reached
        obs = torch.cat([states, goal], dim=1)
        return {"obs": obs[:-1], "next_obs": obs[1:], "action": torch.zeros(length, 1, dtype=torch.int64),
                "reward": torch.zeros(length, 1), "done": torch.arange(length) == length - 1}

    buffer = DequeBuffer(size=8, seed=0)
    for length in (3, 5, 4):
        buffer.push(episode(length))
    her = HerRewardModel({"her_strategy": "final", "her_replay_k": 1, "episode_size": 2},
                         merge_func=lambda state, goal: torch.cat([state, goal], dim=-1),
                         split_func=lambda x: (x[..., :1], x[..., 1:], x[..., :1]),
                         goal_reward_func=lambda achieved, desired: (achieved == desired).all(-1).float())
    policy = SeedPolicy()
    HERLearner(seed_cfg(update_per_collect=1), policy, buffer, her)(OnlineRLContext())
    batch = policy.batches[0]
    assert all(isinstance(value, torch.Tensor) for value in batch.values())
    goals, final_states = batch["obs"][:, 1], batch["next_obs"][:, 0]
    assert set(goals.tolist()) <= {3.0, 4.0, 5.0}  # each relabelled goal is its episode's final state
    assert batch["reward"].reshape(-1).tolist() == (final_states == goals).float().tolist()
