"""The optimizer every policy builds: Adam, fused where torch has a kernel, with ``learn.adam_betas``
and the learning rates of ``learn`` (numbers or schedules, :mod:`rlpipe.config.schedule`); and the
gradient step every policy takes with it (the intrinsic reward models keep their own unclipped one)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from rlpipe.config.schedule import ScheduleError, as_schedule

ADAM_BETAS = (0.9, 0.999)
"""Adam's default ``(beta1, beta2)``, for configs without ``learn.adam_betas`` (the seed's)."""


def adam_betas_of(learn_cfg: Any) -> tuple[float, float]:
    """``learn.adam_betas`` (absent means :data:`ADAM_BETAS`), each checked to lie in ``[0, 1)``."""
    betas = tuple(float(b) for b in getattr(learn_cfg, "adam_betas", ADAM_BETAS))
    if len(betas) != 2 or not all(0.0 <= b < 1.0 for b in betas):
        raise ValueError(f"cfg.learn.adam_betas must be two numbers in [0, 1), got {betas}")
    return betas[0], betas[1]


def initial_learning_rate(learn_cfg: Any, key: str) -> float:
    """``learn.<key>`` at the run's start: the number, or a schedule's ``start`` (a schedule is then
    followed by :class:`~rlpipe.framework.middleware.lr_scheduler` through
    :meth:`~rlpipe.policy.frame.PolicyFrame.set_learning_rate`)."""
    try:
        return as_schedule(getattr(learn_cfg, key)).start
    except ScheduleError as err:
        raise ValueError(f"cfg.learn.{key}: {err}") from None


def make_adam(params: Any, lr: float, betas: tuple[float, float] = ADAM_BETAS) -> torch.optim.Adam:
    """Adam with the fused kernel where torch has one for the parameters' device.

    On small networks the per-parameter Python loop of the default implementation costs
    more than the arithmetic (about 20% of a DQN step on a 64x64 MLP on CPU).
    """
    params = list(params)
    try:
        return torch.optim.Adam(params, lr=lr, betas=betas, fused=True)
    except RuntimeError:  # torch < 2.4 on CPU, or a device without a fused kernel
        return torch.optim.Adam(params, lr=lr, betas=betas)


def gradient_step(
    optimizer: torch.optim.Optimizer, params: Sequence[torch.Tensor], loss: torch.Tensor, grad_clip: float | None
) -> None:
    """Backpropagate ``loss`` into ``params`` (clipping their joint norm) and take an optimizer step."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if grad_clip is not None:
        nn.utils.clip_grad_norm_(params, grad_clip, foreach=True)
    optimizer.step()
