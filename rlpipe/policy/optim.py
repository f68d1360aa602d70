"""The optimizer every policy builds: Adam, fused where torch has a kernel, with ``learn.adam_betas``
and the learning rates of ``learn`` (numbers or schedules, :mod:`rlpipe.config.schedule`); and the
gradient step every policy takes with it (the intrinsic reward models keep their own unclipped one).

Some weights are stored transposed (:func:`rlpipe.model.encoders.store_input_major`): a fused step
takes each of those through its contiguous transpose (:class:`Adam`)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn
from torch.optim.adam import adam

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


MOMENTS = ("exp_avg", "exp_avg_sq")
"""The entries of Adam's state laid out as their parameter."""


def _laid_out_as(param: torch.Tensor, tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` (of ``param``'s shape) with ``param``'s strides: itself, or a copy laid out so."""
    return tensor if tensor.stride() == param.stride() else torch.empty_like(param).copy_(tensor)


def _transposed(tensor: torch.Tensor) -> bool:
    """Whether ``tensor`` is a matrix stored transposed: not contiguous, its transpose contiguous."""
    return tensor.dim() == 2 and not tensor.is_contiguous() and tensor.t().is_contiguous()


class Adam(torch.optim.Adam):
    """torch's Adam whose fused step takes each matrix stored transposed through its contiguous transpose.

    torch's fused CPU kernel on a non-contiguous matrix costs about twice its contiguous time (the
    MinAtar CNN's 1024x128 weight: ~530 against ~290 us); Adam is elementwise, so stepping the
    transposes of a parameter, its gradient and its two moments is the same arithmetic, bit for bit.
    Without such a parameter, or before the moments exist (the first step), torch's step runs as it is.
    """

    def step(self, closure: Any = None) -> Any:
        groups = [[p for p in group["params"] if p.grad is not None] for group in self.param_groups]
        states = [[self.state.get(p, {}) for p in params] for params in groups]
        ready = all(state for group_states in states for state in group_states)  # moments made
        if (closure is not None or not self.defaults["fused"] or self.defaults["amsgrad"] or not ready
                or not any(_transposed(p) for params in groups for p in params)):
            return super().step(closure)
        with torch.no_grad():
            for group, params, group_states in zip(self.param_groups, groups, states, strict=True):
                _fused_adam_step(group, params, group_states)
        return None

    def state_dict(self) -> dict[str, Any]:
        """torch's, with each moment contiguous, as every Adam expects of a checkpoint: torch's fused
        kernel steps a parameter whose moments are laid out otherwise wrongly."""
        state = super().state_dict()
        state["state"] = {index: {key: value.contiguous() if key in MOMENTS else value for key, value in entry.items()}
                          for index, entry in state["state"].items()}
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """torch's, then each moment laid out as its parameter (checkpoints keep them contiguous)."""
        super().load_state_dict(state_dict)
        for param, state in self.state.items():
            for key in MOMENTS:
                if isinstance(state.get(key), torch.Tensor):
                    state[key] = _laid_out_as(param, state[key])

    def zero_grad(self, set_to_none: bool = True) -> None:
        """torch's ``zero_grad``; setting to None is a plain loop here (torch's costs ~30 us a call
        in its profiler and compiler wrappers, a percent of a MinAtar DQN step)."""
        if not set_to_none:
            return super().zero_grad(set_to_none=False)
        for group in self.param_groups:
            for param in group["params"]:
                param.grad = None
        return None


def _fused_adam_step(group: dict[str, Any], params: list[torch.Tensor], states: list[dict[str, Any]]) -> None:
    """torch's fused Adam on one group, with each matrix stored transposed stepped through the
    transposes of itself, its gradient and its two moments (all laid out alike: a gradient laid out
    otherwise, which autograd does not make, is copied into the parameter's layout first)."""
    quads = []
    for param, state in zip(params, states, strict=True):
        assert param.grad is not None  # Adam.step passes only parameters with a gradient
        quad = (param, _laid_out_as(param, param.grad), state["exp_avg"], state["exp_avg_sq"])
        quads.append(tuple(t.t() for t in quad) if _transposed(param) else quad)
    weights, grads, exp_avgs, exp_avg_sqs = (list(column) for column in zip(*quads, strict=True))
    beta1, beta2 = group["betas"]
    adam(weights, grads, exp_avgs, exp_avg_sqs, [], [state["step"] for state in states], fused=True,
         amsgrad=False, beta1=beta1, beta2=beta2, lr=group["lr"], weight_decay=group["weight_decay"],
         eps=group["eps"], maximize=group["maximize"])


def make_adam(params: Any, lr: float, betas: tuple[float, float] = ADAM_BETAS) -> torch.optim.Adam:
    """:class:`Adam` with the fused kernel where torch has one for the parameters' device.

    On small networks the per-parameter Python loop of the default implementation costs
    more than the arithmetic (about 20% of a DQN step on a 64x64 MLP on CPU).
    """
    params = list(params)
    try:
        return Adam(params, lr=lr, betas=betas, fused=True)
    except RuntimeError:  # torch < 2.4 on CPU, or a device without a fused kernel
        return Adam(params, lr=lr, betas=betas)


def gradient_step(
    optimizer: torch.optim.Optimizer, params: Sequence[torch.Tensor], loss: torch.Tensor, grad_clip: float | None
) -> None:
    """Backpropagate ``loss`` into ``params`` (clipping their joint norm) and take an optimizer step."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if grad_clip is not None:
        nn.utils.clip_grad_norm_(params, grad_clip, foreach=True)
    optimizer.step()
