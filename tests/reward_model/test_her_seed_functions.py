"""HER with goal functions written the seed's way: one transition per call.

DI-engine's HerRewardModel calls ``split_func``, ``merge_func`` and ``goal_reward_func`` once per
transition, and its own defaults are written for one observation (re-written below from that
description). Called per transition by rlpipe, they must relabel exactly as rlpipe's batched
defaults do on the same episodes with the same generator.
"""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

import rlpipe
from rlpipe.data import DequeBuffer
from rlpipe.framework import OnlineRLContext
from rlpipe.framework.middleware import HERLearner
from rlpipe.reward_model import HerRewardModel, split_state_goal
from rlpipe.utils.batched import is_batched

N_BITS = 3  # few bits: random goals are sometimes reached, so rewards of 1 occur before relabelling
LENGTHS = (2, 5, 3, 7, 4)
CONFIGS = [
    {"her_strategy": "final"},
    {"her_strategy": "future", "her_replay_k": 3},
    {"her_strategy": "episode", "her_replay_k": 2, "sample_per_episode": 6},
    {"her_strategy": "future", "her_replay_k": 2, "relabel_prob": 0.5},  # some original goals kept
]


# The seed's default goal functions, for one observation (x = concat(state, desired_goal)).
def seed_split(x):
    obs, desired_goal = torch.chunk(x, 2)
    achieved_goal = obs
    return obs, desired_goal, achieved_goal


def seed_merge(x, y):
    return torch.cat((x, y), dim=0)


def seed_goal_reward(achieved_goal, desired_goal):
    if (achieved_goal == desired_goal).all():
        return torch.FloatTensor([1])
    return torch.FloatTensor([0])


def one_observation_split(x):
    """A user's split_func written for one observation: on a batch it would slice rows."""
    return x[:N_BITS], x[N_BITS:], x[:N_BITS]


def bitflip_columns(seed: int, T: int) -> dict[str, torch.Tensor]:
    """A random-policy bit-flip episode as columns of tensors, in the seed's dtypes and shapes."""
    rng = np.random.default_rng(seed)
    states = np.empty((T + 1, N_BITS), dtype=np.float32)
    states[0] = rng.integers(0, 2, N_BITS)
    actions = rng.integers(0, N_BITS, T)
    for t, bit in enumerate(actions):
        states[t + 1] = states[t]
        states[t + 1, bit] = 1.0 - states[t, bit]
    goal = np.repeat(rng.integers(0, 2, (1, N_BITS)).astype(np.float32), T + 1, axis=0)
    obs = torch.from_numpy(np.concatenate([states, goal], axis=1))
    reached = (obs[1:, :N_BITS] == obs[1:, N_BITS:]).all(1)
    return {
        "obs": obs[:-1].clone(),
        "action": torch.from_numpy(actions)[:, None],
        "reward": reached.float()[:, None],
        "next_obs": obs[1:].clone(),
        "done": reached | (torch.arange(T) == T - 1),
    }


def as_transitions(columns: dict[str, torch.Tensor]) -> list[dict[str, torch.Tensor]]:
    return [{key: value[t] for key, value in columns.items()} for t in range(len(columns["obs"]))]


def episodes() -> list[dict[str, torch.Tensor]]:
    return [bitflip_columns(seed, T) for seed, T in enumerate(LENGTHS)]


def assert_same_tensor_batch(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        assert isinstance(a[key], torch.Tensor) and isinstance(b[key], torch.Tensor), key
        assert a[key].dtype == b[key].dtype and torch.equal(a[key], b[key]), key


@pytest.mark.parametrize("cfg", CONFIGS)
@pytest.mark.parametrize("split", [seed_split, one_observation_split])
def test_seed_functions_per_transition_relabel_as_the_batched_defaults(cfg, split):
    """estimate() on the seed's form (a list of transition dicts of tensors), episode by episode."""
    seed_style = HerRewardModel(cfg, merge_func=seed_merge, split_func=split, goal_reward_func=seed_goal_reward)
    default = HerRewardModel(cfg)
    rng_seed_style, rng_default = np.random.default_rng(7), np.random.default_rng(7)
    rewards = []
    for columns in episodes():
        transitions = as_transitions(columns)
        got = seed_style.estimate(transitions, rng=rng_seed_style)
        expected = default.estimate(transitions, rng=rng_default)
        assert len(got) == len(expected) == cfg.get("her_replay_k", 1)
        for got_copy, expected_copy in zip(got, expected, strict=True):
            assert len(got_copy) == len(expected_copy)
            for x, y in zip(got_copy, expected_copy, strict=True):
                assert_same_tensor_batch(x, y)
                assert x["reward"].shape == (1,) and x["obs"].shape == (2 * N_BITS,)
                rewards.append(x["reward"].item())
    assert 0.0 in rewards and 1.0 in rewards  # both outcomes were relabelled and compared


@pytest.mark.parametrize("cfg", CONFIGS)
def test_per_transition_functions_in_relabel_batch_match_the_batched_defaults(cfg):
    """The learner's entry point: many episodes into one batch, tensor columns come back as tensors."""
    eps = episodes()
    seed_style = HerRewardModel(cfg)
    got = seed_style.relabel_batch(eps, np.random.default_rng(3), seed_merge, one_observation_split, seed_goal_reward)
    expected = HerRewardModel(cfg).relabel_batch(eps, np.random.default_rng(3))
    assert_same_tensor_batch(got, expected)
    assert got["reward"].shape == (len(got["obs"]), 1) and got["done"].dtype == torch.bool
    goals, achieved = got["next_obs"][:, N_BITS:], got["next_obs"][:, :N_BITS]
    assert torch.equal(got["obs"][:, N_BITS:], goals)  # obs and next_obs carry the same new goal
    assert torch.equal(got["reward"][:, 0], (achieved == goals).all(1).float())


def test_her_learner_trains_on_the_same_batches_with_seed_functions():
    """HERLearner (the her middleware) passes the model's functions: per transition by default."""

    class Recorder:
        def __init__(self) -> None:
            self.batches: list = []

        def forward(self, batch):
            self.batches.append(batch)
            return {"total_loss": torch.tensor(0.0)}

    cfg = SimpleNamespace(seed=0, policy=SimpleNamespace(
        learn=SimpleNamespace(batch_size=3, update_per_collect=2), collect=SimpleNamespace(unroll_len=1)))
    her_cfg = {"her_strategy": "future", "her_replay_k": 2, "episode_size": 3}
    seed_style = HerRewardModel(
        her_cfg, merge_func=seed_merge, split_func=seed_split, goal_reward_func=seed_goal_reward
    )
    policies = []
    for her in (seed_style, HerRewardModel(her_cfg)):
        buffer = DequeBuffer(size=8, seed=0)
        for columns in episodes():
            buffer.push(columns)
        policies.append(Recorder())
        HERLearner(cfg, policies[-1], buffer, her)(OnlineRLContext())
    with_seed_functions, with_defaults = policies
    assert len(with_seed_functions.batches) == len(with_defaults.batches) == 2
    for a, b in zip(with_seed_functions.batches, with_defaults.batches, strict=True):
        assert_same_tensor_batch(a, b)


def test_per_transition_numpy_functions_on_numpy_episodes_give_numpy_batches():
    eps = [{key: value.numpy() for key, value in columns.items()} for columns in episodes()]
    seen: set[type] = set()

    def split(x):
        seen.add(type(x))
        assert x.shape == (2 * N_BITS,)  # one observation
        return x[:N_BITS], x[N_BITS:], x[:N_BITS]

    def reward(achieved, desired):
        return bool((achieved == desired).all())

    her = HerRewardModel({"her_strategy": "future", "her_replay_k": 2},
                         merge_func=lambda s, g: np.concatenate([s, g]), split_func=split, goal_reward_func=reward)
    got = her.relabel_batch(eps, np.random.default_rng(5))
    expected = HerRewardModel({"her_strategy": "future", "her_replay_k": 2}).relabel_batch(
        eps, np.random.default_rng(5))
    assert seen == {np.ndarray}
    assert got.keys() == expected.keys()
    for key in got:
        assert isinstance(got[key], np.ndarray) and got[key].dtype == expected[key].dtype, key
        np.testing.assert_array_equal(got[key], expected[key])


@pytest.mark.parametrize(
    "make_reward",
    [
        lambda hit: torch.FloatTensor([hit]),  # the seed's: a 1-element tensor
        lambda hit: torch.tensor(float(hit)),  # 0-d tensor
        lambda hit: torch.tensor(hit),  # 0-d bool tensor
        lambda hit: torch.tensor([[hit]], dtype=torch.float64),  # 1 element, 2-d
        lambda hit: hit,  # Python bool
        lambda hit: float(hit),
        lambda hit: int(hit),
        lambda hit: np.bool_(hit),
        lambda hit: np.float64(hit),
        lambda hit: np.array([hit], dtype=np.float32),
    ],
)
def test_a_per_transition_reward_may_be_any_scalar_the_seed_returns(make_reward):
    def reward(achieved, desired):
        return make_reward(bool((achieved == desired).all()))

    eps = episodes()
    got = HerRewardModel({"her_strategy": "episode"}, goal_reward_func=reward).relabel_batch(
        eps, np.random.default_rng(1))
    expected = HerRewardModel({"her_strategy": "episode"}).relabel_batch(eps, np.random.default_rng(1))
    assert_same_tensor_batch(got, expected)


class Counted:
    """The batched defaults behind call counters; marked batched or not."""

    def __init__(self) -> None:
        self.calls = {"merge": 0, "split": 0, "reward": 0}

    def merge(self, state, goal):
        self.calls["merge"] += 1
        return torch.cat([state, goal], dim=-1)

    def split(self, x):
        self.calls["split"] += 1
        return x[..., :N_BITS], x[..., N_BITS:], x[..., :N_BITS]

    def reward(self, achieved, desired):
        self.calls["reward"] += 1
        return (achieved == desired).all(-1).float()


def test_functions_are_called_per_row_unless_batched_by_the_model_or_the_decorator():
    eps = episodes()
    n_data, k = sum(LENGTHS), 2
    n_rows = k * n_data
    cfg = {"her_strategy": "future", "her_replay_k": k}
    expected = HerRewardModel(cfg).relabel_batch(eps, np.random.default_rng(0))

    per_row = Counted()
    got = HerRewardModel(cfg).relabel_batch(eps, np.random.default_rng(0), per_row.merge, per_row.split, per_row.reward)
    assert per_row.calls == {"merge": 2 * n_rows, "split": 2 * n_data, "reward": n_rows}
    assert_same_tensor_batch(got, expected)

    whole = Counted()
    got = HerRewardModel(cfg, batched=True).relabel_batch(
        eps, np.random.default_rng(0), whole.merge, whole.split, whole.reward)
    assert whole.calls == {"merge": 2, "split": 2, "reward": 1}
    assert_same_tensor_batch(got, expected)

    mixed = Counted()  # only the reward is marked: the marks compose per function
    reward = rlpipe.batched(mixed.reward)
    got = HerRewardModel(cfg).relabel_batch(eps, np.random.default_rng(0), mixed.merge, mixed.split, reward)
    assert mixed.calls == {"merge": 2 * n_rows, "split": 2 * n_data, "reward": 1}
    assert_same_tensor_batch(got, expected)


def test_a_per_transition_split_sees_only_rows_that_were_drawn():
    """With sample_per_episode, split_func runs on each drawn row (and goal row) once: no more
    calls than the seed makes (two per drawn transition and one per copy), far fewer than every row."""
    eps = [bitflip_columns(seed, 40) for seed in range(4)]
    cfg = {"her_strategy": "future", "her_replay_k": 2, "sample_per_episode": 3}
    counted = Counted()
    got = HerRewardModel(cfg).relabel_batch(
        eps, np.random.default_rng(2), counted.merge, counted.split, counted.reward)
    assert_same_tensor_batch(got, HerRewardModel(cfg).relabel_batch(eps, np.random.default_rng(2)))
    drawn, rows = 4 * 3, 4 * 3 * 2
    assert 0 < counted.calls["split"] <= 2 * drawn + rows < 2 * 4 * 40
    assert (counted.calls["merge"], counted.calls["reward"]) == (2 * rows, rows)


def test_batched_marks_a_function_in_place_and_wraps_what_takes_no_mark():
    def reward(achieved, desired):
        return achieved

    assert rlpipe.batched(reward) is reward and is_batched(reward)
    marked_builtin = rlpipe.batched(np.add)
    assert is_batched(marked_builtin) and not is_batched(np.add) and marked_builtin(1, 2) == 3
    assert is_batched(split_state_goal)  # rlpipe's defaults are batched
    with pytest.raises(TypeError, match="batched\\(\\) marks functions, got int"):
        rlpipe.batched(3)


@pytest.mark.parametrize(
    ("functions", "message"),
    [
        ({"goal_reward_func": lambda a, g: (a == g).float()},
         r"goal_reward_func returned a Tensor of shape \(3,\) for one transition; .* pass batched=True"),
        ({"split_func": lambda x: torch.chunk(x, 2)},
         r"split_func returned 2 values for one observation; expected \(state, desired_goal, achieved_goal\)"),
        ({"merge_func": lambda s, g: torch.cat([s, g])[: 6 - int(s[0])]},
         r"merge_func returned rows of different shapes \[\(5,\), \(6,\)\]"),
    ],
)
def test_a_per_transition_function_returning_the_wrong_thing_is_one_line(functions, message):
    with pytest.raises(ValueError, match=message) as info:
        HerRewardModel({"her_strategy": "future"}, **functions).relabel_batch(episodes(), np.random.default_rng(0))
    assert "\n" not in str(info.value)
