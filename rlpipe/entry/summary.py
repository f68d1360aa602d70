"""Run summary: the figures a user looks at first, written to ``summary.json``."""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from rlpipe.framework.context import OnlineRLContext


@dataclass
class RunSummary:
    """What one training run achieved."""

    env_step: int = 0
    train_iter: int = 0
    best_eval_return: float | None = None
    last_eval_return: float | None = None
    solved: bool = False
    solved_env_step: int | None = None
    wall_time_s: float = 0.0
    updates_per_env_step: float | None = None
    """Gradient updates per collected env step (the replay ratio; None for episode collection)."""
    eval_metric: str = "return"
    """What ``best_eval_return`` and ``last_eval_return`` hold: the mean return or the success rate."""

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def read(cls, path: Path) -> RunSummary:
        """The summary an earlier (possibly interrupted) run wrote."""
        return cls(**json.loads(path.read_text()))


class summary_tracker:  # noqa: N801 - middleware are named like functions
    """Middleware keeping a :class:`RunSummary` up to date (reads counters and ``ctx.eval_value``)."""

    def __init__(
        self, stop_value: float, earlier: RunSummary | None = None, updates_per_env_step: float | None = None,
        eval_metric: str = "return",
    ) -> None:
        self.summary = earlier if earlier is not None else RunSummary()
        self.summary.updates_per_env_step = updates_per_env_step
        self.summary.eval_metric = eval_metric
        self._stop_value = stop_value
        self._start = time.perf_counter() - self.summary.wall_time_s  # a resumed run keeps counting

    def __call__(self, ctx: OnlineRLContext) -> None:
        s = self.summary
        s.env_step, s.train_iter = ctx.env_step, ctx.train_iter
        s.wall_time_s = round(time.perf_counter() - self._start, 2)
        if ctx.eval_value is None:
            return
        s.last_eval_return = ctx.eval_value
        s.best_eval_return = max(ctx.eval_value, s.best_eval_return or float("-inf"))
        if ctx.eval_value >= self._stop_value and not s.solved:
            s.solved, s.solved_env_step = True, ctx.env_step
