"""HER on the seed's data: transition dicts of torch tensors, goal functions written for tensors.

As in test_her.py, an observation says where it comes from: ``obs`` at step t of episode e is
``[e, t, goal]``, ``next_obs`` is ``[e, t + 1, goal]``, and the original goal (-1, -1) is never
achieved. A relabelled goal ``(e', g + 1)`` names the episode e' and the step g it was taken from.
"""

import copy

import numpy as np
import pytest
import torch

from rlpipe.reward_model import HerRewardModel

STRATEGIES = ["final", "future", "episode"]


def tensor_episode(e: int, T: int, action_shape: tuple[int, ...] = (1,)) -> list[dict[str, torch.Tensor]]:
    """The seed's layout: obs float32 [4] = [state, goal], action int64, reward float32 [1], done bool."""
    goal = torch.tensor([-1.0, -1.0])
    return [
        {
            "obs": torch.cat([torch.tensor([e, t], dtype=torch.float32), goal]),
            "action": torch.full(action_shape, 100 * e + t, dtype=torch.int64),
            "reward": torch.zeros(1),
            "next_obs": torch.cat([torch.tensor([e, t + 1], dtype=torch.float32), goal]),
            "done": torch.tensor(t == T - 1),
        }
        for t in range(T)
    ]


class TensorGoals:
    """Goal functions written for tensors, as a seed user writes them; they record the types
    they were called with."""

    def __init__(self) -> None:
        self.seen: set[type] = set()

    def split(self, x):
        self.seen.add(type(x))
        return x[..., :2], x[..., 2:], x[..., :2]

    def merge(self, state, goal):
        self.seen.update({type(state), type(goal)})
        return torch.cat([state, goal], dim=-1)

    def reward(self, achieved, desired):
        self.seen.update({type(achieved), type(desired)})
        return (achieved == desired).all(-1).float()


def decode(transition: dict[str, torch.Tensor]) -> tuple[int, int, int, int]:
    """(episode, step t, goal episode, goal step g) of a relabelled transition."""
    e, t, ge, g_plus_1 = (int(v) for v in transition["obs"])
    return e, t, ge, g_plus_1 - 1


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("action_shape", [(1,), ()])
def test_tensor_episode_gives_tensor_transitions_relabelled_by_the_strategy(strategy, action_shape):
    T, e = 9, 3
    episode = tensor_episode(e, T, action_shape)
    before = copy.deepcopy(episode)
    goals = TensorGoals()
    her = HerRewardModel({"her_strategy": strategy, "her_replay_k": 16})
    copies = her.estimate(
        episode, goals.merge, goals.split, goals.reward, rng=np.random.default_rng(0)
    )

    assert goals.seen == {torch.Tensor}
    assert len(copies) == 16 and all(len(c) == T for c in copies)
    steps, goal_steps = [], []
    for relabelled in copies:
        for i, tr in enumerate(relabelled):
            assert set(tr) == {"obs", "action", "reward", "next_obs", "done", "terminated"}
            for key, value in episode[i].items():
                assert isinstance(tr[key], torch.Tensor), key
                assert (tr[key].dtype, tr[key].shape) == (value.dtype, value.shape), key
            assert isinstance(tr["terminated"], torch.Tensor) and tr["terminated"].dtype == torch.bool

            ep, t, ge, g = decode(tr)
            assert (ep, t, ge) == (e, i, e)  # the goal comes from this episode
            assert torch.equal(tr["next_obs"], torch.tensor([e, t + 1, e, g + 1], dtype=torch.float32))
            assert torch.equal(tr["action"], episode[t]["action"])
            assert torch.equal(tr["done"], episode[t]["done"])
            assert torch.equal(tr["reward"], goals.reward(tr["next_obs"][:2], tr["next_obs"][2:]).reshape(1))
            assert tr["reward"].item() == float(g == t) and tr["terminated"].item() == (g == t)
            steps.append(t)
            goal_steps.append(g)
    t, g = np.array(steps), np.array(goal_steps)
    if strategy == "final":
        assert (g == T - 1).all()
    elif strategy == "future":
        assert ((g >= t) & (g < T)).all() and (g > t).any()
    else:
        assert ((g >= 0) & (g < T)).all() and (g < t).any() and (g > t).any()
    for a, b in zip(episode, before, strict=True):  # the caller's episode is untouched
        assert all(torch.equal(a[key], b[key]) for key in b)


def test_returned_transitions_are_independent_tensors():
    episode = tensor_episode(0, 4)
    [relabelled] = HerRewardModel({"her_strategy": "final"}).estimate(episode, rng=np.random.default_rng(0))
    relabelled[0]["action"] += 1000
    relabelled[0]["obs"][0] = 7.0
    assert relabelled[1]["action"].item() == 1 and relabelled[1]["obs"][0].item() == 0.0
    assert episode[0]["action"].item() == 0 and episode[0]["obs"][0].item() == 0.0
    assert all(tr["obs"].numel() == tr["obs"].untyped_storage().nbytes() // 4 for tr in relabelled)


def test_default_functions_and_functions_given_at_construction_serve_tensor_episodes():
    """The defaults (numpy) and construction-time tensor functions give the same relabelling."""
    goals = TensorGoals()
    episode = [{**tr, "obs": tr["obs"][[0, 1, 0, 1]]} for tr in tensor_episode(1, 6)]  # state half = 2
    built = HerRewardModel(
        {"her_strategy": "future", "her_replay_k": 2},
        merge_func=goals.merge,
        split_func=goals.split,
        goal_reward_func=goals.reward,
    )
    default = HerRewardModel({"her_strategy": "future", "her_replay_k": 2})
    a = built.estimate(episode, rng=np.random.default_rng(4))
    b = default.estimate(episode, rng=np.random.default_rng(4))
    assert goals.seen == {torch.Tensor}
    for x, y in zip([tr for c in a for tr in c], [tr for c in b for tr in c], strict=True):
        assert all(isinstance(y[key], torch.Tensor) and torch.equal(x[key], y[key]) for key in x)


def test_batched_tensor_functions_may_return_numpy_arrays_or_python_scalars():
    def reward(achieved, desired):  # a per-row Python float list, not a tensor
        return [float(row) for row in (achieved == desired).all(-1)]

    def merge(state, goal):
        return np.concatenate([state.numpy(), goal.numpy()], axis=-1)

    def split(x):
        return x[..., :2], x[..., 2:], x[..., :2]

    her = HerRewardModel({"her_strategy": "final"}, batched=True)
    [relabelled] = her.estimate(tensor_episode(2, 5), merge, split, reward, rng=np.random.default_rng(0))
    assert all(isinstance(tr[key], torch.Tensor) for tr in relabelled for key in tr)
    assert [tr["reward"].item() for tr in relabelled] == [0.0, 0.0, 0.0, 0.0, 1.0]
    assert relabelled[0]["obs"].dtype == torch.float32 and relabelled[0]["reward"].shape == (1,)


def test_columnar_tensor_episodes_keep_their_types_in_both_entry_points():
    transitions = tensor_episode(0, 3)
    columns = {key: torch.stack([tr[key] for tr in transitions]) for key in transitions[0]}
    columns["reward"] = columns["reward"].squeeze(1).double()  # a column of shape [T], float64
    goals = TensorGoals()
    her = HerRewardModel({"her_strategy": "episode", "her_replay_k": 2})
    [first, _] = her.estimate(columns, goals.merge, goals.split, goals.reward, rng=np.random.default_rng(0))
    assert first[0]["reward"].shape == () and first[0]["reward"].dtype == torch.float64
    assert first[0]["action"].shape == (1,) and first[0]["obs"].dtype == torch.float32

    batch = her.relabel_batch([columns, columns], np.random.default_rng(0), goals.merge, goals.split, goals.reward)
    assert goals.seen == {torch.Tensor}
    assert all(isinstance(column, torch.Tensor) and len(column) == 12 for column in batch.values())
    assert batch["reward"].dtype == torch.float64 and batch["action"].shape == (12, 1)
    obs = batch["obs"]
    assert torch.equal(batch["reward"], (obs[:, 3] - 1 == obs[:, 1]).double())


def test_numpy_episodes_still_give_numpy_transitions():
    episode = [{key: value.numpy() for key, value in tr.items()} for tr in tensor_episode(0, 5)]
    her = HerRewardModel({"her_strategy": "future", "her_replay_k": 2})
    copies = her.estimate(episode, rng=np.random.default_rng(0))
    assert all(isinstance(tr[key], (np.ndarray, np.generic)) for c in copies for tr in c for key in tr)
    assert copies[0][0]["obs"].dtype == np.float32 and copies[0][0]["reward"].dtype == np.float32


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_episodes_come_back_on_their_device():
    episode = [{key: value.cuda() for key, value in tr.items()} for tr in tensor_episode(0, 4)]
    goals = TensorGoals()
    her = HerRewardModel({"her_strategy": "future"})
    [relabelled] = her.estimate(episode, goals.merge, goals.split, goals.reward, rng=np.random.default_rng(0))
    assert all(tr[key].is_cuda for tr in relabelled for key in tr)
    assert [int(tr["obs"][1]) for tr in relabelled] == [0, 1, 2, 3]
