"""The warm-up: the first ``policy.random_collect_size`` env steps act uniformly at random and train nothing."""
from __future__ import annotations

from typing import Any

from rlpipe.framework.context import OnlineRLContext


def warming_up(cfg: Any, ctx: OnlineRLContext) -> bool:
    """True while ``ctx.env_step`` is below ``cfg.policy.random_collect_size`` (0 when the config
    has none, as the seed's may not): the learners and reward-model trainers wait for the end,
    which a long warm-up reaches over several collections
    (:class:`~rlpipe.framework.middleware.StepCollector`)."""
    return ctx.env_step < int(getattr(cfg.policy, "random_collect_size", 0) or 0)
