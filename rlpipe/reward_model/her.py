"""Hindsight experience replay (HER): relabel episodes with goals they actually achieved.

An episode that missed its goal still shows how to reach the states it visited. HER copies
its transitions, replaces the desired goal in ``obs`` and ``next_obs`` by a goal the
episode achieved, and recomputes the reward for that goal (Andrychowicz et al., 2017).

Strategies for the new goal of the transition at step ``t`` of an episode of length ``T``
(the achieved goal of ``next_obs`` at step ``g``):

- ``final``:   ``g = T - 1`` (where the episode ended);
- ``future``:  ``g`` uniform in ``[t, T - 1]`` (a goal reached at or after this step);
- ``episode``: ``g`` uniform in ``[0, T - 1]``.

Goal functions, written for one transition as in the seed (DI-engine calls them once per
transition):

- ``split_func(x [D]) -> (state [S], desired_goal [G], achieved_goal [G])``
- ``merge_func(state [S], goal [G]) -> x [D]``
- ``goal_reward_func(achieved_goal [G], desired_goal [G]) -> reward`` (a number, a bool, or a
  0-d or 1-element array or tensor)

A user's functions are called so, once per row (see :mod:`rlpipe.reward_model.goal_functions`),
unless they are batched: ``HerRewardModel(..., batched=True)``, or a function marked with
:func:`rlpipe.batched`, is called once on the whole batch with a leading axis ``[B, ...]`` and
returns ``[B, ...]`` (rewards ``[B]``). The defaults are batched and read
``x = concat(state, desired_goal)`` in equal halves with the achieved goal equal to the state
(bit flip) and reward 1.0 when the achieved goal equals the goal, else 0, as the seed's
defaults do for one observation. :class:`rlpipe.envs.goal.GoalLayout` provides batched
functions for dict-observation goal envs.

Termination. With ``terminal_on_success=True`` (default) a relabelled transition is terminal
exactly when its new reward is positive: in an env that ends the episode on reaching the
goal (bit flip) the relabelled episode would have ended there, and would *not* have ended
where the original goal was reached. Goal envs that never terminate on success (robotics)
pass False, which keeps the stored ``terminated``. ``truncated`` is always kept.

Original goals. The seed relabels every returned transition (config ``relabel_prob``
1.0, the default). The paper's recipe keeps a share of the original goals (``future_p =
k / (k + 1)``, 0.8 for k = 4), which grounds the values of the goals evaluation asks for;
with ``relabel_prob < 1`` each returned transition is relabelled with that probability and
otherwise keeps its original goal (reward and ``terminated`` are recomputed for that goal,
which reproduces the stored ones when ``goal_reward_func`` is the env's reward). On 15-bit
flip with DQN (gamma 0.9, 3 seeds), ``her_replay_k=4, relabel_prob=0.8`` reached 0.90-0.99
success at 30k env steps where the seed's all-relabelled setting reached about 0.6.

Two entry points share one vectorised core: :meth:`HerRewardModel.estimate` (the seed's
per-episode call returning lists of transition dicts) and
:meth:`HerRewardModel.relabel_batch` (many episodes into one columnar batch, used by the
learner). Neither loops over transitions in Python except to build the seed's dicts and to
call per-transition goal functions. Both draw the same random numbers whichever way the
functions are called, so per-transition functions and their batched equivalents give the
same batch for the same generator.

The caller's types. The core works on numpy columns. Episodes of torch tensors (the seed's
data) are read as numpy views once, on entry; the goal functions the caller gives receive
tensors (``torch.from_numpy`` views of the core's arrays or their rows, on the CPU) and may
return tensors, arrays or Python scalars; every output field the caller gave as a tensor
comes back as a tensor of that field's dtype, per-row shape (a reward given as ``[1]`` stays
``[1]``) and device. The default goal functions are numpy and serve either kind. Numpy episodes take the
core's path untouched.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from math import prod
from typing import Any

import numpy as np
import torch

from rlpipe.reward_model.base import BaseRewardModel
from rlpipe.reward_model.goal_functions import (
    GoalRewardFunc,
    MergeFunc,
    SplitFunc,
    as_numpy,
    numpy_rows,
    per_row_merge,
    per_row_reward,
    per_row_split,
    tensor_batched,
    tensor_rows,
)
from rlpipe.utils.batch import Batch
from rlpipe.utils.batched import batched, is_batched

HER_STRATEGIES = ("final", "future", "episode")

Episode = Mapping[str, Any] | Sequence[Mapping[str, Any]]

__all__ = [
    "HER_STRATEGIES",
    "HerRewardModel",
    "equal_goal_reward",
    "merge_state_goal",
    "split_state_goal",
]


@batched
def split_state_goal(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Default split: ``x = concat(state, desired_goal)`` in halves; achieved goal = state."""
    size = x.shape[-1] if x.ndim else 0
    if size == 0 or size % 2:
        raise ValueError(
            f"observation of shape {x.shape} cannot be split into equal state and goal halves "
            "(default split_func); pass a split_func"
        )
    state = x[..., : size // 2]
    return state, x[..., size // 2 :], state


@batched
def merge_state_goal(state: np.ndarray, goal: np.ndarray) -> np.ndarray:
    """Default merge: ``concat(state, goal)`` on the last axis."""
    return np.concatenate([state, goal], axis=-1)


@batched
def equal_goal_reward(achieved_goal: np.ndarray, desired_goal: np.ndarray) -> np.ndarray:
    """Default goal reward: 1.0 where the achieved goal equals the goal exactly, else 0.0."""
    return np.all(achieved_goal == desired_goal, axis=-1).astype(np.float32)


def _cfg_value(cfg: Any, key: str, default: Any) -> Any:
    """Optional config entry from a mapping (dict, EasyDict) or an attribute object (pydantic)."""
    if isinstance(cfg, Mapping):
        return cfg.get(key, default)
    return getattr(cfg, key, default)


def _positive_int(key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"her config {key} must be a positive integer, got {value!r}")
    return int(value)


def _optional_positive_int(key: str, value: Any) -> int | None:
    return None if value is None else _positive_int(key, value)


class _TensorEdge:
    """Where a caller's torch tensors meet the numpy core (see "The caller's types" above).

    Remembers, from the caller's episode, the dtype and per-row shape of each tensor field
    and the device; :meth:`restore` turns the core's output columns back into the caller's
    types.
    """

    def __init__(self, first: Mapping[str, Any], columnar: bool) -> None:
        self._device: torch.device = first["obs"].device
        self._tensor_fields = {
            key: (value.dtype, value.shape[1:] if columnar else value.shape)
            for key, value in first.items()
            if isinstance(value, torch.Tensor)
        }
        self._other_fields = first.keys() - self._tensor_fields.keys()

    @classmethod
    def of(cls, episode: Episode) -> _TensorEdge | None:
        """The edge for a validated episode whose ``obs`` is a tensor; None for numpy data."""
        if isinstance(episode, Mapping):
            first, columnar = episode, True
        else:
            first, columnar = episode[0], False
        return cls(first, columnar) if isinstance(first["obs"], torch.Tensor) else None

    def restore(self, batch: Batch) -> dict[str, Any]:
        """Columns as the caller gave them: tensors of the input dtype, row shape and device.

        Fields the caller gave as something other than tensors stay numpy; fields the core
        added (``terminated`` when the input has none) become tensors.
        """
        restored: dict[str, Any] = {}
        for key, column in batch.items():
            if key in self._other_fields:
                restored[key] = column
                continue
            tensor = torch.as_tensor(column, device=self._device)
            if key in self._tensor_fields:
                dtype, row_shape = self._tensor_fields[key]
                tensor = tensor.to(dtype)
                if prod(tensor.shape[1:]) == row_shape.numel():
                    tensor = tensor.reshape(len(tensor), *row_shape)
            restored[key] = tensor
        return restored


def _episode_columns(episode: Episode, name: str) -> dict[str, np.ndarray]:
    """One episode as columns with leading time dim T, from columns or a list of transition dicts."""
    if isinstance(episode, Mapping):
        columns = {key: as_numpy(value) for key, value in episode.items()}
    elif isinstance(episode, Sequence) and not isinstance(episode, (str, bytes)):
        if len(episode) == 0:
            raise ValueError(f"{name} is empty: there is nothing to relabel")
        keys = list(episode[0])
        if any(transition.keys() != episode[0].keys() for transition in episode):
            raise ValueError(f"{name}: every transition must have the fields {sorted(keys)}")
        columns = {key: np.stack([as_numpy(tr[key]) for tr in episode]) for key in keys}
    else:
        raise TypeError(
            f"{name} must be a dict of arrays or a list of transition dicts, got {type(episode).__name__}"
        )
    for key in ("obs", "next_obs"):
        if key not in columns:
            raise ValueError(f"{name} has no {key!r} field (fields: {sorted(columns)})")
    obs = columns["obs"]
    if obs.ndim < 2:
        raise ValueError(f"{name} obs has shape {obs.shape}; expected [T, obs_dim]")
    if len(obs) == 0:
        raise ValueError(f"{name} is empty: there is nothing to relabel")
    if columns["next_obs"].shape != obs.shape:
        raise ValueError(f"{name} next_obs has shape {columns['next_obs'].shape} but obs has {obs.shape}")
    for key, column in columns.items():
        if column.ndim == 0 or len(column) != len(obs):
            raise ValueError(
                f"{name} field {key!r} has shape {column.shape}; expected leading size {len(obs)}"
            )
    return columns


class HerRewardModel(BaseRewardModel):
    """Relabel goals of whole episodes (see the module docstring for strategies and functions).

    ``cfg`` holds (as attributes or mapping keys, e.g. ``cfg.policy.other.her``):
    ``her_strategy`` (final/future/episode, default future), ``her_replay_k`` (relabelled copies
    per transition, default 1), ``episode_size`` (episodes per batch; None: the learner's
    batch size), ``sample_per_episode`` (transitions drawn per episode, with replacement;
    None: all of them) and ``relabel_prob`` (share of returned transitions given a hindsight
    goal, default 1.0; see "Original goals" in the module docstring).

    ``merge_func``, ``split_func`` and ``goal_reward_func`` (here or per call; None: the
    batched defaults) are called once per transition, as the seed calls them, unless
    ``batched=True`` or the function is marked with :func:`rlpipe.batched`; then once per
    batch (see the module docstring).

    ``cuda`` is accepted for the seed's signature: relabelling is numpy on the CPU and the
    policy moves the batch to its device.
    """

    def __init__(
        self,
        cfg: Any,
        cuda: bool = False,
        *,
        merge_func: MergeFunc | None = None,
        split_func: SplitFunc | None = None,
        goal_reward_func: GoalRewardFunc | None = None,
        terminal_on_success: bool = True,
        batched: bool = False,
    ) -> None:
        strategy = _cfg_value(cfg, "her_strategy", "future")
        if strategy not in HER_STRATEGIES:
            raise ValueError(f"her_strategy {strategy!r} is not one of {', '.join(HER_STRATEGIES)}")
        relabel_prob = _cfg_value(cfg, "relabel_prob", 1.0)
        if (
            isinstance(relabel_prob, bool)
            or not isinstance(relabel_prob, (int, float))
            or not 0 <= relabel_prob <= 1
        ):
            raise ValueError(f"her config relabel_prob must be a number in [0, 1], got {relabel_prob!r}")
        self.cuda = cuda
        self._strategy: str = strategy
        self._replay_k = _positive_int("her_replay_k", _cfg_value(cfg, "her_replay_k", 1))
        self._episode_size = _optional_positive_int("episode_size", _cfg_value(cfg, "episode_size", None))
        self._sample_per_episode = _optional_positive_int(
            "sample_per_episode", _cfg_value(cfg, "sample_per_episode", None)
        )
        self._merge_func = merge_func
        self._split_func = split_func
        self._goal_reward_func = goal_reward_func
        self._terminal_on_success = terminal_on_success
        self._batched = batched
        self._relabel_prob = float(relabel_prob)
        self._rng = np.random.default_rng()

    @property
    def her_strategy(self) -> str:
        return self._strategy

    @property
    def her_replay_k(self) -> int:
        return self._replay_k

    @property
    def episode_size(self) -> int | None:
        """Episodes per training batch; None: the learner uses ``cfg.policy.learn.batch_size``."""
        return self._episode_size

    @property
    def sample_per_episode(self) -> int | None:
        """Transitions relabelled per episode (drawn with replacement); None: every transition."""
        return self._sample_per_episode

    def estimate(  # type: ignore[override]
        self,
        episode: Episode,
        merge_func: MergeFunc | None = None,
        split_func: SplitFunc | None = None,
        goal_reward_func: GoalRewardFunc | None = None,
        rng: np.random.Generator | None = None,
    ) -> list[list[dict[str, Any]]]:
        """Relabel one episode: ``her_replay_k`` lists of transition dicts (the seed's contract).

        ``episode`` is a dict of arrays with leading time dim or a list of transition dicts,
        of numpy arrays or torch tensors; the transitions come back in the same types.
        Each list holds ``sample_per_episode`` (or T) transitions; functions left None fall
        back to the model's. ``rng`` defaults to the model's own unseeded generator.
        """
        columns = _episode_columns(episode, "episode")
        edge = _TensorEdge.of(episode)
        functions = self._goal_functions(edge, merge_func, split_func, goal_reward_func)
        batch = self._relabel([columns], self._rng if rng is None else rng, *functions)
        out = batch if edge is None else edge.restore(batch)
        rows = len(batch["obs"]) // self._replay_k
        return [
            [{key: _row(column, k * rows + i) for key, column in out.items()} for i in range(rows)]
            for k in range(self._replay_k)
        ]

    def relabel_batch(
        self,
        episodes: Sequence[Episode],
        rng: np.random.Generator,
        merge_func: MergeFunc | None = None,
        split_func: SplitFunc | None = None,
        goal_reward_func: GoalRewardFunc | None = None,
    ) -> dict[str, Any]:
        """Relabel many episodes at once into one columnar batch.

        Rows: ``her_replay_k`` blocks (copy-major) of ``sum(sample_per_episode or T_i)`` rows
        each, episode by episode. Every field of the episodes is carried; ``obs``,
        ``next_obs``, ``reward`` (and ``terminated``, see the module docstring) are rewritten.
        Numpy episodes give a numpy :data:`Batch`; episodes of tensors give tensor columns
        (their types are read from the first episode).
        """
        if len(episodes) == 0:
            raise ValueError("relabel_batch got no episodes")
        columns = [_episode_columns(ep, f"episode {i}") for i, ep in enumerate(episodes)]
        edge = _TensorEdge.of(episodes[0])
        functions = self._goal_functions(edge, merge_func, split_func, goal_reward_func)
        batch = self._relabel(columns, rng, *functions)
        return batch if edge is None else edge.restore(batch)

    def _goal_functions(
        self,
        edge: _TensorEdge | None,
        merge_func: MergeFunc | None,
        split_func: SplitFunc | None,
        goal_reward_func: GoalRewardFunc | None,
    ) -> tuple[MergeFunc, SplitFunc, GoalRewardFunc]:
        """The call's functions, else the model's, else the (numpy, batched) defaults, as
        batched numpy functions for the core: a caller's function is called per row unless it
        is batched, with arrays of the caller's kind (tensors when ``edge`` is set)."""
        rows = numpy_rows if edge is None else tensor_rows

        def pick(
            call: Callable[..., Any] | None,
            model: Callable[..., Any] | None,
            default: Callable[..., Any],
            per_row: Callable[..., Callable[..., Any]],
        ) -> Callable[..., Any]:
            func = call or model
            if func is None:
                return default
            if self._batched or is_batched(func):
                return func if edge is None else tensor_batched(func)
            return per_row(func, rows)

        return (
            pick(merge_func, self._merge_func, merge_state_goal, per_row_merge),
            pick(split_func, self._split_func, split_state_goal, per_row_split),
            pick(goal_reward_func, self._goal_reward_func, equal_goal_reward, per_row_reward),
        )

    def _relabel(
        self,
        episodes: list[dict[str, np.ndarray]],
        rng: np.random.Generator,
        merge: MergeFunc,
        split: SplitFunc,
        goal_reward: GoalRewardFunc,
    ) -> Batch:
        data = _concat_episodes(episodes)
        lengths = np.array([len(ep["obs"]) for ep in episodes], dtype=np.int64)
        starts = np.cumsum(lengths) - lengths
        episode_of, t = self._sample_steps(lengths, rng)
        T = lengths[episode_of]
        g = self._goal_steps(t, T, rng)
        rows, goal_rows = starts[episode_of] + t, starts[episode_of] + g

        (state, desired_goal, _), at = _split_needed(split, data["obs"], rows)
        (next_state, _, next_achieved), next_at = _split_needed(split, data["next_obs"], rows, goal_rows)
        new_goal = next_achieved[next_at[goal_rows]]
        if self._relabel_prob < 1.0:
            keep = rng.random(len(rows)) >= self._relabel_prob
            new_goal[keep] = desired_goal[at[rows[keep]]]
        obs = merge(state[at[rows]], new_goal)
        next_obs = merge(next_state[next_at[rows]], new_goal)
        if obs.shape[1:] != data["obs"].shape[1:]:
            raise ValueError(
                f"merge_func made observations of shape {obs.shape[1:]}, expected {data['obs'].shape[1:]}"
            )
        reward = np.asarray(goal_reward(next_achieved[next_at[rows]], new_goal), dtype=np.float32)
        if reward.shape != rows.shape:
            raise ValueError(
                f"goal_reward_func returned shape {reward.shape}, expected {rows.shape} "
                "(a batched function returns one reward per row)"
            )

        relabelled = {
            "obs": obs.astype(data["obs"].dtype, copy=False),
            "next_obs": next_obs.astype(data["next_obs"].dtype, copy=False),
            "reward": reward,
        }
        if self._terminal_on_success:
            relabelled["terminated"] = reward > 0
        carried = {key: column[rows] for key, column in data.items() if key not in relabelled}
        return {**carried, **relabelled}

    def _sample_steps(self, lengths: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """(episode index, step index) of every returned row, tiled ``her_replay_k`` times."""
        if self._sample_per_episode is None:
            episode_of = np.repeat(np.arange(len(lengths)), lengths)
            t = np.arange(len(episode_of)) - (np.cumsum(lengths) - lengths)[episode_of]
        else:
            episode_of = np.repeat(np.arange(len(lengths)), self._sample_per_episode)
            t = rng.integers(0, lengths[episode_of])
        return np.tile(episode_of, self._replay_k), np.tile(t, self._replay_k)

    def _goal_steps(self, t: np.ndarray, T: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Step whose next_obs achieved goal becomes the new goal, per the strategy."""
        if self._strategy == "final":
            return T - 1
        if self._strategy == "future":
            return rng.integers(t, T)
        return rng.integers(0, T)


def _split_needed(
    split: SplitFunc, column: np.ndarray, *row_sets: np.ndarray
) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """``split`` of the rows of ``column`` that ``row_sets`` name, each distinct row once.

    Returns the parts over those rows and where each row of ``column`` sits in them (index a
    part with ``at[rows]``). When every row is needed (whole episodes) the column is split as
    it is; otherwise only the needed rows are, which spares a per-transition ``split_func``
    the calls for rows never drawn (``sample_per_episode``).
    """
    needed = np.zeros(len(column), dtype=bool)
    for rows in row_sets:
        needed[rows] = True
    if needed.all():
        return tuple(split(column)), np.arange(len(column))
    at = np.cumsum(needed) - 1
    return tuple(split(column[needed])), at


def _row(column: Any, i: int) -> Any:
    """Row ``i`` of an output column; a tensor row is cloned, like the seed's copied
    transitions, because a view would keep (and pickle) the whole column."""
    row = column[i]
    return row.clone() if isinstance(row, torch.Tensor) else row


def _concat_episodes(episodes: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Episodes' columns end to end (one copy per field, none for a single episode)."""
    keys = list(episodes[0])
    for i, ep in enumerate(episodes[1:], start=1):
        if ep.keys() != episodes[0].keys():
            raise ValueError(f"episode {i} has fields {sorted(ep)}; episode 0 has {sorted(keys)}")
    if len(episodes) == 1:
        return episodes[0]
    return {key: np.concatenate([ep[key] for ep in episodes]) for key in keys}
