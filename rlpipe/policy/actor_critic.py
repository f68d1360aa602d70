"""What the actor-critic policies (SAC, TD3, DDPG) share: batches as tensors, one optimizer
step, Polyak averaging, critics frozen for the actor step, and the policy's own generators."""
from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import nn

ArrayLike = np.ndarray | torch.Tensor


class ContinuousBatch(NamedTuple):
    """A learning batch as tensors on the policy's device (``B`` rows)."""

    obs: torch.Tensor  # [B, obs_dim]
    action: torch.Tensor  # [B, action_dim], in [-1, 1]
    reward: torch.Tensor  # [B]
    next_obs: torch.Tensor  # [B, obs_dim]
    terminated: torch.Tensor  # [B], float 1.0 where there is no bootstrap
    value_gamma: torch.Tensor | float  # [B] or the scalar gamma
    weight: torch.Tensor | None  # [B] importance weights


def continuous_batch(
    batch: Mapping[str, ArrayLike], device: torch.device, gamma: float, nstep: int
) -> ContinuousBatch:
    """Convert a columnar batch; ``value_gamma`` falls back to ``gamma`` only for 1-step returns."""

    def tensor(key: str) -> torch.Tensor:
        return torch.as_tensor(batch[key], dtype=torch.float32, device=device)

    if "value_gamma" in batch:
        value_gamma: torch.Tensor | float = tensor("value_gamma")
    elif nstep == 1:
        value_gamma = gamma
    else:
        raise ValueError(f"cfg.nstep is {nstep} but the batch has no 'value_gamma' column")
    return ContinuousBatch(
        tensor("obs"), tensor("action"), tensor("reward"), tensor("next_obs"), tensor("terminated"),
        value_gamma, tensor("weight") if "weight" in batch else None,
    )


def check_model_cfg(model_cfg: Any) -> tuple[int, int, list[int]]:
    """``(obs_shape, action_shape, hidden sizes)`` from ``cfg.model``, which must know the env's sizes."""
    if model_cfg.obs_shape is None or model_cfg.action_shape is None:
        raise ValueError(
            "cfg.model.obs_shape and cfg.model.action_shape must be set (from the env) to build the model"
        )
    return int(model_cfg.obs_shape), int(model_cfg.action_shape), list(model_cfg.encoder_hidden_size_list)


def target_theta_of(learn_cfg: Any) -> float:
    if learn_cfg.target_theta is None:
        raise ValueError("cfg.learn.target_theta must be set: actor-critic targets are Polyak-averaged every step")
    return float(learn_cfg.target_theta)


def gradient_step(
    optimizer: torch.optim.Optimizer, params: Sequence[torch.Tensor], loss: torch.Tensor, grad_clip: float | None
) -> None:
    """Backpropagate ``loss`` into ``params`` (clipping their joint norm) and take an optimizer step."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if grad_clip is not None:
        nn.utils.clip_grad_norm_(params, grad_clip, foreach=True)
    optimizer.step()


def soft_update_(target: Sequence[torch.Tensor], online: Sequence[torch.Tensor], theta: float) -> None:
    """``target <- (1 - theta) * target + theta * online``, in place, for every pair."""
    with torch.no_grad():
        torch._foreach_lerp_(list(target), list(online), theta)


@contextmanager
def frozen(module: nn.Module) -> Iterator[None]:
    """Stop ``module``'s parameters from requiring grad: gradients still flow through its
    inputs, but no weight gradients are computed (the actor step through the critics)."""
    module.requires_grad_(False)
    try:
        yield
    finally:
        module.requires_grad_(True)


class Generators:
    """The policy's two random streams: exploration (``collect``) and the update's noise (``learn``).

    Both derive from one seed; :meth:`seed` reseeds exploration only, as DQN's ``seed`` does.
    """

    def __init__(self, seed: int, device: torch.device) -> None:
        self.collect = torch.Generator(device=device)
        self.learn = torch.Generator(device=device)
        self.learn.manual_seed(int(np.random.SeedSequence(seed).generate_state(1, dtype=np.uint64)[0]))
        self.seed(seed)

    def seed(self, seed: int) -> None:
        self.collect.manual_seed(seed)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"collect": self.collect.get_state(), "learn": self.learn.get_state()}

    def load_state_dict(self, state: Mapping[str, torch.Tensor]) -> None:
        self.collect.set_state(state["collect"])
        self.learn.set_state(state["learn"])
