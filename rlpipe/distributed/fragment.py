"""What a collector sends the learner: one collection's transitions and the figures that go with them."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

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


def merge_episode_figures(figures: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """One set of training-episode figures from each collector's latest: counts
    (:data:`COUNTED_FIGURES`) summed, window means averaged over the collectors that report them."""
    values: dict[str, list[float]] = {}
    for collector_figures in figures:
        for key, value in collector_figures.items():
            values.setdefault(key, []).append(value)
    return {key: sum(v) if key in COUNTED_FIGURES else sum(v) / len(v) for key, v in values.items()}
