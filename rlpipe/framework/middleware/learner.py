"""Learner middleware: fetch, (estimate rewards,) train — ``update_per_collect`` times.

Same signatures and context contract as the seed's ``OffPolicyLearner`` and ``HERLearner``.
Four deliberate differences from the seed's implementation:

* a reward model may return a new batch instead of rewriting it in place; the learner
  trains on whichever it gets (see :func:`reward_estimator`);
* each fetched batch's backward part (priority update) runs right after that batch is
  trained, so priorities land on exactly the items of that batch, however many batches
  one iteration trains and whoever else reads ``ctx.train_output``;
* fetcher, estimator and trainer are called directly (:func:`call_middleware`), not through
  the module-level ``task``, so a learner works in any :class:`Task`, or in none;
* a learner trains nothing in an iteration whose collector set ``ctx.warming_up``: the seed's
  collector takes the whole random warm-up in its first iteration, a long one here takes several
  (see :class:`~rlpipe.framework.middleware.StepCollector`).
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from rlpipe.framework.context import OnlineRLContext
from rlpipe.framework.middleware.functional.data_processor import offpolicy_data_fetcher
from rlpipe.framework.middleware.functional.her import her_data_enhancer
from rlpipe.framework.middleware.functional.reward_estimator import reward_estimator
from rlpipe.framework.middleware.functional.trainer import trainer
from rlpipe.framework.task import Role, call_middleware, role_gated

logger = logging.getLogger(__name__)
IDLE_ITERATIONS_WARNING = 100
"""Iterations without training, while env steps are collected, after which a learner warns (once)."""


class _IdleWatch:
    """Warn once when a learner trains nothing for :data:`IDLE_ITERATIONS_WARNING` iterations in
    a row while the collector goes on: its buffer gets no data (a pipeline without
    ``data_pusher``, say). Warm-up (a buffer still smaller than a batch) ends long before."""

    def __init__(self, learner: str) -> None:
        self._learner = learner
        self._idle = 0
        self._first_env_step = 0
        self._warned = False

    def __call__(self, ctx: OnlineRLContext) -> None:
        if ctx.train_output:
            self._idle = 0
            return
        if self._idle == 0:
            self._first_env_step = ctx.env_step
        self._idle += 1
        collected = ctx.env_step - self._first_env_step
        if self._idle >= IDLE_ITERATIONS_WARNING and collected > 0 and not self._warned:
            logger.warning("%s has trained nothing for %d iterations while %d env steps were collected: "
                           "no data reaches its buffer (is data_pusher in the pipeline?)",
                           self._learner, self._idle, collected)
            self._warned = True


def _learn_rounds(
    ctx: OnlineRLContext,
    rounds: int,
    fetch: Callable[[OnlineRLContext], Any],
    train: Callable[[OnlineRLContext], Any],
    estimate: Callable[[OnlineRLContext], Any] | None = None,
) -> None:
    """Run up to ``rounds`` fetch -> estimate -> train rounds; ``ctx.train_output`` becomes their list."""
    outputs = []
    for _ in range(rounds):
        finish_fetch = call_middleware(fetch, ctx)
        if ctx.train_data is None:
            finish_fetch()
            break
        if estimate is not None:
            estimate(ctx)
        train(ctx)
        finish_fetch()
        outputs.append(ctx.train_output)
    ctx.train_output = outputs


@role_gated(Role.LEARNER)
class OffPolicyLearner:
    """Off-policy learner: ``update_per_collect`` rounds of fetch, optional reward estimate, train.

    ``buffer_`` is one buffer, a list of ``(buffer, ratio)`` or a dict of buffers. Reads
    ``ctx.train_iter``; writes ``ctx.train_data``, ``ctx.train_iter`` and ``ctx.train_output``
    (the list of this iteration's learn outputs; stops early when a fetch yields no data).
    """

    def __init__(
        self,
        cfg: Any,
        policy: Any,
        buffer_: Any,
        reward_model: Any | None = None,
        log_freq: int = 100,
    ) -> None:
        self.cfg = cfg
        self._update_per_collect = cfg.policy.learn.update_per_collect
        self._fetcher = offpolicy_data_fetcher(cfg, buffer_)
        self._trainer = trainer(cfg, policy, log_freq=log_freq)
        self._reward_estimator = reward_estimator(cfg, reward_model) if reward_model is not None else None
        self._idle_watch = _IdleWatch(type(self).__name__)

    def __call__(self, ctx: OnlineRLContext) -> None:
        if ctx.warming_up:
            ctx.train_output = []
            return
        _learn_rounds(ctx, self._update_per_collect, self._fetcher, self._trainer, self._reward_estimator)
        self._idle_watch(ctx)


@role_gated(Role.LEARNER)
class HERLearner:
    """Learner with hindsight experience replay: episodes are fetched and relabelled, then trained.

    Same context contract as :class:`OffPolicyLearner`.
    """

    def __init__(self, cfg: Any, policy: Any, buffer_: Any, her_reward_model: Any) -> None:
        self.cfg = cfg
        self._update_per_collect = cfg.policy.learn.update_per_collect
        self._fetcher = her_data_enhancer(cfg, buffer_, her_reward_model)
        self._trainer = trainer(cfg, policy)
        self._idle_watch = _IdleWatch(type(self).__name__)

    def __call__(self, ctx: OnlineRLContext) -> None:
        if ctx.warming_up:
            ctx.train_output = []
            return
        _learn_rounds(ctx, self._update_per_collect, self._fetcher, self._trainer)
        self._idle_watch(ctx)
