"""Exploration schedules for collection."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from rlpipe.config.schedule import SCHEDULE_TYPES, Schedule, ScheduleError, ScheduleType
from rlpipe.framework.context import OnlineRLContext
from rlpipe.framework.middleware.functional.lr_scheduler import run_budget


def epsilon_schedule(
    kind: str, start: float, end: float, decay: int | None, budget: int | None = None
) -> Callable[[int], float]:
    """Epsilon as a function of env steps: ``exp`` (time constant ``decay``), ``linear`` (over
    ``decay``) or ``constant`` (``start``); ``decay`` None spans ``budget`` (``run.max_env_step``)."""
    if kind not in SCHEDULE_TYPES:
        raise ValueError(f"config key 'policy.other.eps.type': unknown schedule '{kind}' "
                         f"(use {', '.join(repr(t) for t in SCHEDULE_TYPES)})")
    schedule = Schedule(cast(ScheduleType, kind), start, start if kind == "constant" else end, decay)
    try:
        schedule.value(0, budget)
    except ScheduleError as err:
        raise ValueError(f"config key 'policy.other.eps': {err}") from None
    return lambda step: schedule.value(step, budget)


def eps_greedy_handler(cfg: Any) -> Callable[[OnlineRLContext], None]:
    """Set ``ctx.collect_kwargs['eps']`` from ``cfg.policy.other.eps`` and ``ctx.env_step`` (a
    schedule without ``decay`` spans ``cfg.run.max_env_step``)."""
    eps = cfg.policy.other.eps
    schedule = epsilon_schedule(eps.type, eps.start, eps.end, eps.decay, run_budget(cfg))

    def _handle(ctx: OnlineRLContext) -> None:
        ctx.collect_kwargs["eps"] = schedule(ctx.env_step)

    return _handle


def fixed_eps(eps: float) -> Callable[[OnlineRLContext], None]:
    """Set ``ctx.collect_kwargs['eps']`` to ``eps`` every time (one collector's own epsilon)."""

    def _handle(ctx: OnlineRLContext) -> None:
        ctx.collect_kwargs["eps"] = eps

    return _handle


def epsilon_ladder(index: int, collectors: int) -> float:
    """Ape-X's epsilon of collector ``index`` of ``collectors`` (Horgan et al. 2018):
    ``0.4 ** (1 + 7 * index / (collectors - 1))``, from 0.4 down to about 0.00066; 0.4 for one."""
    return 0.4 ** (1 + 7 * index / (collectors - 1)) if collectors > 1 else 0.4

