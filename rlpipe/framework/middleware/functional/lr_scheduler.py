"""Learning-rate schedules: the policy's learning rates follow ``ctx.env_step``, as epsilon does."""
from __future__ import annotations

from typing import Any, Protocol

from rlpipe.config.algorithms import learning_rate_keys
from rlpipe.config.schedule import Schedule, ScheduleError, as_schedule
from rlpipe.framework.context import OnlineRLContext
from rlpipe.framework.task import Role, role_gated


class LearningRates(Protocol):
    """What the scheduler needs of a policy (a part of :class:`rlpipe.policy.Policy`)."""

    def set_learning_rate(self, key: str, lr: float) -> None: ...


def run_budget(cfg: Any) -> int | None:
    """``cfg.run.max_env_step``, the horizon of a schedule without ``decay`` (None in a config without it)."""
    return getattr(getattr(cfg, "run", None), "max_env_step", None)


def scheduled_learning_rates(cfg: Any) -> dict[str, Schedule]:
    """The learning rates of ``cfg.policy.learn`` that change over the run (not constants), by key
    under ``learn`` (``learning_rate_q``); the keys are those ``cfg.policy.type`` reads."""
    learn = cfg.policy.learn
    schedules = {}
    for dotted in learning_rate_keys(cfg.policy.type):
        key = dotted.removeprefix("policy.learn.")
        try:
            schedule = as_schedule(getattr(learn, key))
        except ScheduleError as err:
            raise ValueError(f"config key '{dotted}': {err}") from None
        if schedule.type != "constant":
            schedules[key] = schedule
    return schedules


@role_gated(Role.LEARNER)
class lr_scheduler:  # noqa: N801 - lower case, like the seed's middleware functions
    """Before the learner's updates, set each scheduled learning rate of ``policy`` to its value at
    ``ctx.env_step`` (reads ``ctx.env_step``; writes nothing to the context).

    A schedule without ``decay`` spans ``cfg.run.max_env_step``. The value lands in the
    optimizers' parameter groups, so the learn outputs' ``cur_lr*`` report it and checkpoints
    hold it; a resumed run restores ``ctx.env_step`` and goes on from the same point.
    """

    def __init__(self, cfg: Any, policy: LearningRates) -> None:
        self._policy = policy
        self._budget = run_budget(cfg)
        self._schedules = scheduled_learning_rates(cfg)
        for key, schedule in self._schedules.items():
            try:
                schedule.value(0, self._budget)
            except ScheduleError as err:
                raise ValueError(f"config key 'policy.learn.{key}': {err}") from None

    def __call__(self, ctx: OnlineRLContext) -> None:
        for key, schedule in self._schedules.items():
            self._policy.set_learning_rate(key, schedule.value(ctx.env_step, self._budget))
