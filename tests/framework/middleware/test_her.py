import logging
from dataclasses import dataclass

import numpy as np
import pytest

from rlpipe.config.schema import Config
from rlpipe.framework.context import OnlineRLContext
from rlpipe.framework.middleware.functional.her import her_data_enhancer
from rlpipe.reward_model import HerRewardModel


@dataclass
class Stored:
    data: dict[str, np.ndarray]


class EpisodeList:
    """A fake episode buffer implementing the real count()/sample() contract (sample raises
    ValueError when asked for more than it holds, like DequeBuffer)."""

    def __init__(self) -> None:
        self.items: list[Stored] = []
        self.rng = np.random.default_rng(0)

    def push(self, episode: dict[str, np.ndarray]) -> None:
        self.items.append(Stored(episode))

    def count(self) -> int:
        return len(self.items)

    def sample(self, size: int) -> list[Stored]:
        if size > len(self.items):
            raise ValueError(f"cannot sample {size} items from {len(self.items)}")
        return [self.items[i] for i in self.rng.choice(len(self.items), size, replace=False)]


def bitflip_episode(T: int, n_bits: int = 4) -> dict[str, np.ndarray]:
    state = np.zeros((T + 1, n_bits), dtype=np.float32)
    for t in range(T):
        state[t + 1] = state[t]
        state[t + 1, t % n_bits] = 1.0 - state[t, t % n_bits]
    goal = np.ones((T, n_bits), dtype=np.float32)
    return {
        "obs": np.concatenate([state[:-1], goal], axis=1),
        "action": np.arange(T, dtype=np.int64) % n_bits,
        "reward": np.zeros(T, dtype=np.float32),
        "next_obs": np.concatenate([state[1:], goal], axis=1),
        "terminated": np.zeros(T, dtype=bool),
        "truncated": np.arange(T) == T - 1,
    }


def test_shortage_gives_no_data_and_warns_once(caplog):
    buffer_ = EpisodeList()
    buffer_.push(bitflip_episode(3))
    her = HerRewardModel({"her_strategy": "future", "episode_size": 2})
    fetch = her_data_enhancer(Config(), buffer_, her)
    ctx = OnlineRLContext()
    ctx.train_data = {"stale": np.zeros(1)}
    with caplog.at_level(logging.WARNING):
        fetch(ctx)
        assert ctx.train_data is None
        fetch(ctx)
    shortages = [r for r in caplog.records if "buffer holds 1 episodes but 2 are needed" in r.getMessage()]
    assert len(shortages) == 1


def test_relabels_episode_size_episodes_into_one_batch():
    buffer_ = EpisodeList()
    for T in (3, 4, 5, 4):
        buffer_.push(bitflip_episode(T))
    her = HerRewardModel(
        {"her_strategy": "final", "her_replay_k": 2, "episode_size": 3, "sample_per_episode": 2}
    )
    fetch = her_data_enhancer(Config(), buffer_, her)
    ctx = OnlineRLContext()
    fetch(ctx)
    batch = ctx.train_data
    assert set(batch) == {"obs", "action", "reward", "next_obs", "terminated", "truncated"}
    assert all(len(v) == 3 * 2 * 2 for v in batch.values())
    np.testing.assert_array_equal(
        batch["reward"], (batch["next_obs"][:, :4] == batch["next_obs"][:, 4:]).all(1)
    )
    assert buffer_.count() == 4


@pytest.mark.parametrize("batch_size", [2, 3])
def test_episode_size_none_uses_learn_batch_size(batch_size):
    buffer_ = EpisodeList()
    for _ in range(3):
        buffer_.push(bitflip_episode(5))
    her = HerRewardModel({"her_strategy": "episode"})
    cfg = Config(policy={"learn": {"batch_size": batch_size}})
    ctx = OnlineRLContext()
    her_data_enhancer(cfg, buffer_, her)(ctx)
    assert len(ctx.train_data["obs"]) == batch_size * 5


def test_seeded_from_config():
    buffer_a, buffer_b = EpisodeList(), EpisodeList()
    for buffer_ in (buffer_a, buffer_b):
        for T in (3, 6):
            buffer_.push(bitflip_episode(T))
    her = HerRewardModel({"her_strategy": "future", "episode_size": 2})
    ctx_a, ctx_b = OnlineRLContext(), OnlineRLContext()
    her_data_enhancer(Config(seed=7), buffer_a, her)(ctx_a)
    her_data_enhancer(Config(seed=7), buffer_b, her)(ctx_b)
    assert all(np.array_equal(ctx_a.train_data[k], ctx_b.train_data[k]) for k in ctx_a.train_data)


def test_works_with_the_real_deque_buffer():
    from rlpipe.data import DequeBuffer

    buffer_ = DequeBuffer(size=10)
    for T in (2, 4, 6):
        buffer_.push(bitflip_episode(T))
    her = HerRewardModel({"her_strategy": "future", "episode_size": 3, "her_replay_k": 2})
    ctx = OnlineRLContext()
    fetch = her_data_enhancer(Config(), buffer_, her)
    fetch(ctx)
    assert len(ctx.train_data["obs"]) == 2 * (2 + 4 + 6)
    short = her_data_enhancer(Config(), DequeBuffer(size=10), her)
    short(ctx)
    assert ctx.train_data is None
