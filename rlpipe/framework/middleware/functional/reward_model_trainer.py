"""Reward-model trainer middleware: learned reward models (RND, ICM) learn on a fixed schedule."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rlpipe.data.buffer import Buffer
from rlpipe.framework.context import OnlineRLContext


def reward_model_trainer(cfg: Any, reward_model: Any, buffer_: Buffer) -> Callable[[OnlineRLContext], None]:
    """Train ``reward_model`` ``cfg.reward_model.update_per_collect`` times per iteration.

    Each update is one ``reward_model.train(batch)`` on ``cfg.reward_model.batch_size``
    transitions sampled from ``buffer_`` (nothing while it holds fewer, or while
    ``ctx.warming_up``). Put it after ``data_pusher``, so the freshly collected transitions can be
    drawn; its place relative to the learner does not matter, because the learner's estimate
    reads the model as it is. Writes ``ctx.reward_model_output``: the model's ``last_metrics`` (intrinsic reward mean
    and std of the latest estimate, latest loss), which the logger records.
    """
    rounds, batch_size = int(cfg.reward_model.update_per_collect), int(cfg.reward_model.batch_size)

    def _train(ctx: OnlineRLContext) -> None:
        if ctx.warming_up or buffer_.count() < batch_size:
            return
        for _ in range(rounds):
            reward_model.train(buffer_.sample_batch(batch_size).data)
        ctx.reward_model_output = dict(getattr(reward_model, "last_metrics", {}))

    return _train
