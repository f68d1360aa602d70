"""What a collector sends the learner: one collection's transitions and the figures that go with them.

Stacked-frame observations (Atari's ``uint8 [4, 84, 84]``) travel as frames: a transition's
``obs`` and ``next_obs`` share 7 of their 8 frames with each other and with the next row of
their env, so a fragment carries each distinct frame once (:func:`pack_frames`) and the
stacks as int32 indices into them; the learner rebuilds them exactly
(:meth:`Fragment.stacked_transitions`) before its frame store keeps each frame once again.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from rlpipe.data.buffer.frames import unique_frames
from rlpipe.framework.middleware.collector import FAILED_STEPS

COUNTED_FIGURES = (FAILED_STEPS,)
"""Episode figures that are counts (summed over collectors); the others are window means."""


@dataclass(frozen=True)
class Fragment:
    """The transitions of one collection (``policy.collect.n_sample`` env steps) of one collector.

    ``transitions`` is the columnar batch the collect half left in ``ctx.trajectories``
    (numpy arrays, so Ray's object store carries them without pickling their contents), or
    None when the collection handed on no rows yet (the newest vector step and open n-step
    windows are held until the next one). The learner counts ``env_steps`` and
    ``env_episodes`` from the fragments that arrive, so a fragment lost with its collector
    is never counted.
    """

    collector: int
    """Index of the collector that made it."""
    sequence: int
    """Fragments this collector's process made before this one (a restarted collector counts from 0 again)."""
    policy_version: int
    """The learner's ``train_iter`` when the weights it acted with left the learner (0: initial weights)."""
    env_steps: int
    env_episodes: int
    transitions: dict[str, np.ndarray] | None
    episode_stats: dict[str, float]
    """The collector's :meth:`~rlpipe.envs.episode_stats.EpisodeStats.summary` and ``failed_steps``."""
    eps: float | None
    """The exploration epsilon it collected with (dqn), for the learner's logs."""
    frames: np.ndarray | None = None
    """The distinct frames of the stack fields when the collector packed them (:func:`pack_frames`):
    those fields of ``transitions`` are then int32 indices ``[N, K]`` into it."""

    def stacked_transitions(self) -> dict[str, np.ndarray] | None:
        """``transitions`` as the collector's pipeline made them: stacks rebuilt from ``frames`` if packed."""
        if self.transitions is None or self.frames is None:
            return self.transitions
        return unpack_frames(self.transitions, self.frames)


STACK_FIELDS = ("obs", "next_obs")
"""The fields of stacked frames a fragment packs: those the learner's frame store keeps as frames."""


def pack_frames(
    transitions: Mapping[str, np.ndarray], fields: Sequence[str] = STACK_FIELDS
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """``transitions`` with each stack field ``[N, K, *frame]`` replaced by int32 indices ``[N, K]``
    into the distinct frames of all of them (returned second; see
    :func:`~rlpipe.data.buffer.frames.unique_frames`): a frame that several stacks, rows or
    fields hold is sent once."""
    stacks = [np.asarray(transitions[key]) for key in fields]
    frame_shape = stacks[0].shape[2:]
    frames, index = unique_frames(np.concatenate([stack.reshape(-1, *frame_shape) for stack in stacks]))
    out, start = dict(transitions), 0
    for key, stack in zip(fields, stacks, strict=True):
        count = stack.shape[0] * stack.shape[1]
        out[key] = index[start : start + count].reshape(stack.shape[:2])
        start += count
    return out, frames


def unpack_frames(
    transitions: Mapping[str, np.ndarray], frames: np.ndarray, fields: Sequence[str] = STACK_FIELDS
) -> dict[str, np.ndarray]:
    """What :func:`pack_frames` was given: each stack field's indices replaced by their frames."""
    return {**transitions, **{key: frames[transitions[key]] for key in fields}}


def merge_episode_figures(figures: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """One set of training-episode figures from each collector's latest: counts
    (:data:`COUNTED_FIGURES`) summed, window means averaged over the collectors that report them."""
    values: dict[str, list[float]] = {}
    for collector_figures in figures:
        for key, value in collector_figures.items():
            values.setdefault(key, []).append(value)
    return {key: sum(v) if key in COUNTED_FIGURES else sum(v) / len(v) for key, v in values.items()}
