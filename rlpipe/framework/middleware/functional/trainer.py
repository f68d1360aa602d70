"""Trainer middleware: one learning step of the policy on ``ctx.train_data``."""
from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

from rlpipe.config.algorithms import learning_rate_keys
from rlpipe.errors import RlpipeError
from rlpipe.framework.context import OnlineRLContext

logger = logging.getLogger(__name__)


class TrainingDivergedError(RlpipeError, RuntimeError):
    """The loss became NaN or infinite: training stops rather than corrupt the model further."""


def _divergence_advice(cfg: Any) -> str:
    """What to try after a divergence: the learning-rate keys of ``cfg.policy.type`` (of the
    table of algorithms; ``policy.learn.learning_rate`` for a config without a known type)."""
    keys = learning_rate_keys(getattr(getattr(cfg, "policy", None), "type", None))
    return f"try a lower {' / '.join(keys)} or set policy.learn.grad_clip"


def _check_finite(output: dict[str, Any], train_iter: int, advice: str) -> None:
    loss = float(output["total_loss"])
    if not math.isfinite(loss):
        raise TrainingDivergedError(f"total_loss is {loss} at train_iter {train_iter}: training diverged ({advice})")


def trainer(cfg: Any, policy: Any, log_freq: int = 100) -> Callable[[OnlineRLContext], None]:
    """Train ``policy`` (a learn mode: ``forward(batch) -> dict``) once per call.

    Reads ``ctx.train_data`` (skips when None); writes ``ctx.train_output`` (the step's
    dict) and increments ``ctx.train_iter``. A non-finite ``total_loss`` stops training with
    one line naming the learning-rate keys of ``cfg.policy.type``.
    """
    advice = _divergence_advice(cfg)

    def _train(ctx: OnlineRLContext) -> None:
        if ctx.train_data is None:
            return
        output = policy.forward(ctx.train_data)
        _check_finite(output, ctx.train_iter, advice)
        ctx.train_iter += 1
        ctx.train_output = output
        if log_freq and ctx.train_iter % log_freq == 0:
            logger.info("train_iter %d: total_loss %.4f", ctx.train_iter, output["total_loss"])

    return _train


def multistep_trainer(policy: Any, log_freq: int = 100) -> Callable[[OnlineRLContext], None]:
    """Like :func:`trainer` for policies whose ``forward`` runs several steps and returns a list.

    Writes ``ctx.train_output`` (the list) and adds its length to ``ctx.train_iter``.
    """
    advice = _divergence_advice(None)

    def _train(ctx: OnlineRLContext) -> None:
        if ctx.train_data is None:
            return
        outputs = policy.forward(ctx.train_data)
        for i, output in enumerate(outputs):
            _check_finite(output, ctx.train_iter + i, advice)
        before = ctx.train_iter
        ctx.train_iter += len(outputs)
        ctx.train_output = outputs
        if log_freq and ctx.train_iter // log_freq > before // log_freq:
            logger.info("train_iter %d: total_loss %.4f", ctx.train_iter, outputs[-1]["total_loss"])

    return _train
