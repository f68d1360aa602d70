"""Exploration schedules for collection."""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from rlpipe.framework.context import OnlineRLContext


def epsilon_schedule(kind: str, start: float, end: float, decay: int) -> Callable[[int], float]:
    """Epsilon as a function of env steps: ``exp`` (time constant ``decay``) or ``linear`` (over ``decay``)."""
    if kind == "exp":
        return lambda step: end + (start - end) * math.exp(-step / decay)
    if kind == "linear":
        return lambda step: end + (start - end) * max(0.0, 1.0 - step / decay)
    raise ValueError(f"config key 'policy.other.eps.type': unknown schedule '{kind}' (use 'exp' or 'linear')")


def eps_greedy_handler(cfg: Any) -> Callable[[OnlineRLContext], None]:
    """Set ``ctx.collect_kwargs['eps']`` from ``cfg.policy.other.eps`` and ``ctx.env_step``."""
    eps = cfg.policy.other.eps
    schedule = epsilon_schedule(eps.type, eps.start, eps.end, eps.decay)

    def _handle(ctx: OnlineRLContext) -> None:
        ctx.collect_kwargs["eps"] = schedule(ctx.env_step)

    return _handle
