"""Hooks: plain callables that see the run after every training iteration (``rlpipe.train(hooks=...)``).

A hook gets a :class:`RunView` (the policy the learner trains, the replay buffer, the run's
config, the counters) and may stop the run by returning ``False`` or calling
:meth:`RunView.stop`. :class:`hook_runner` is the middleware that calls them; it sits at the
``after_evaluate`` insertion point, so the termination checker, the checkpoint saver and the
summary that follow see a stop in the same iteration, as they see a stop signal's.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rlpipe.config import Config
from rlpipe.data.buffer import Buffer
from rlpipe.framework import OnlineRLContext
from rlpipe.policy import Policy

HOOK_POINT = "after_evaluate"
"""The insertion point (:data:`~rlpipe.recipes.pipeline.INSERTION_POINTS`) the hooks run at."""


@dataclass(frozen=True)
class RunView:
    """What a hook sees after one training iteration. The objects are the run's own (the policy
    is the one the learner trains): read them; change them only if you mean to change the run."""

    policy: Policy
    buffer: Buffer
    config: Config
    env_step: int
    train_iter: int
    last_eval_value: float | None
    """The latest evaluation's value (mean return or success rate); None before the first."""
    ctx: OnlineRLContext
    """The pipeline's context, for anything else (``ctx.train_output``, ``ctx.eval_value``, ...)."""
    _stop: Callable[[], None] = field(repr=False, compare=False)

    def stop(self) -> None:
        """Stop the run after this iteration (final checkpoint, summary), as returning False does."""
        self._stop()


Hook = Callable[[RunView], Any]
"""A hook: returns False (or calls ``view.stop()``) to stop the run; anything else goes on."""


class hook_runner:  # noqa: N801 - middleware are named like functions
    """Middleware calling ``hooks`` in order after every iteration; the first that asks for a stop
    sets ``ctx.finish`` and is named in :attr:`stopped_by` (the later ones still run this time)."""

    def __init__(self, hooks: Sequence[Hook], policy: Policy, buffer: Buffer, config: Config) -> None:
        self._hooks = list(hooks)
        self._policy, self._buffer, self._config = policy, buffer, config
        self.stopped_by: str | None = None
        """``hook <name>`` of the hook that stopped the run; None while none did."""
        self._asked = False

    def _ask(self) -> None:
        """:meth:`RunView.stop` of the hook being called."""
        self._asked = True

    def __call__(self, ctx: OnlineRLContext) -> None:
        last = ctx.last_eval_value if ctx.last_eval_iter >= 0 else None
        for hook in self._hooks:
            self._asked = False
            view = RunView(self._policy, self._buffer, self._config, ctx.env_step, ctx.train_iter, last, ctx,
                           self._ask)
            if hook(view) is False or self._asked:
                ctx.finish = True
                if self.stopped_by is None:
                    self.stopped_by = f"hook {getattr(hook, '__name__', type(hook).__name__)}"
