"""Stops the task after a budget of env steps or train iterations."""
from __future__ import annotations

from collections.abc import Callable

from rlpipe.framework.context import OnlineRLContext


def termination_checker(
    max_env_step: int | None = None, max_train_iter: int | None = None
) -> Callable[[OnlineRLContext], None]:
    """Set ``ctx.finish`` once ``ctx.env_step >= max_env_step`` or ``ctx.train_iter >= max_train_iter``."""

    def _check(ctx: OnlineRLContext) -> None:
        if max_env_step is not None and ctx.env_step >= max_env_step:
            ctx.finish = True
        if max_train_iter is not None and ctx.train_iter >= max_train_iter:
            ctx.finish = True

    return _check
