"""HER data enhancer: sample whole episodes and hand the trainer their relabelled transitions."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from rlpipe.framework.context import OnlineRLContext
from rlpipe.reward_model.her import HerRewardModel

logger = logging.getLogger(__name__)

__all__ = ["EpisodeBuffer", "her_data_enhancer"]


class _Stored(Protocol):
    @property
    def data(self) -> Mapping[str, np.ndarray]: ...


class EpisodeBuffer(Protocol):
    """What the enhancer needs of a buffer holding one episode per item (e.g. ``DequeBuffer``)."""

    def count(self) -> int: ...

    def sample(self, size: int) -> Sequence[_Stored]: ...


def her_data_enhancer(
    cfg: Any, buffer_: EpisodeBuffer, her_reward_model: HerRewardModel
) -> Callable[[OnlineRLContext], None]:
    """Sample episodes from ``buffer_`` and relabel them into ``ctx.train_data``.

    Episodes per call: ``her_reward_model.episode_size``, or ``cfg.policy.learn.batch_size``
    when that is None. Relabelling goes through the model's relabel_batch with a generator seeded from
    ``cfg.seed`` (unseeded when the config has none, as the seed's configs may). Writes
    ``ctx.train_data`` (a columnar batch), or None while the buffer holds fewer episodes
    than needed; that shortage is logged once, not on every call.
    """
    n_episode = her_reward_model.episode_size or cfg.policy.learn.batch_size
    rng = np.random.default_rng(getattr(cfg, "seed", None))  # the seed's configs may have no seed
    warned_shortage = False

    def _fetch_her(ctx: OnlineRLContext) -> None:
        nonlocal warned_shortage
        stored = buffer_.count()
        if stored < n_episode:
            if not warned_shortage:
                logger.warning(
                    "HER: the buffer holds %d episodes but %d are needed per batch; "
                    "training waits for more (logged once)",
                    stored,
                    n_episode,
                )
                warned_shortage = True
            ctx.train_data = None
            return
        episodes = [item.data for item in buffer_.sample(n_episode)]
        ctx.train_data = her_reward_model.relabel_batch(episodes, rng)

    return _fetch_her
