"""Reward estimator middleware: lets a reward model rewrite the rewards of the batch."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rlpipe.framework.context import OnlineRLContext


def reward_estimator(cfg: Any, reward_model: Any) -> Callable[[OnlineRLContext], None]:
    """Apply ``reward_model.estimate`` to ``ctx.train_data``.

    A model may rewrite the batch in place (returning None) or return a new batch; the
    returned batch replaces ``ctx.train_data`` so that the trainer sees it either way.
    """

    def _estimate(ctx: OnlineRLContext) -> None:
        if ctx.train_data is None:
            return
        estimated = reward_model.estimate(ctx.train_data)
        if estimated is not None:
            ctx.train_data = estimated

    return _estimate
