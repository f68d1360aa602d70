"""QR-DQN, distributional DQN by quantile regression (Dabney et al., 2018, "Distributional
Reinforcement Learning with Quantile Regression").

Each action's return distribution is ``num_quantiles`` quantiles at the midpoints
``tau_i = (2i + 1) / 2N``; they regress on the target quantiles ``r + gamma^k theta'_j`` (no
bootstrap past a terminal state) with the quantile Huber loss (:func:`quantile_huber_loss`).

Metrics returned by ``learn_mode.forward``:
    total_loss  quantile Huber loss (importance-weighted when ``weight`` is given).
    q_value     mean online Q (the quantiles' means) over the batch and all actions.
    priority    the loss per sample, np.float32 [B], for prioritised replay.
    cur_lr      learning rate of the step.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from rlpipe.policy.distributional import DistributionalQPolicy
from rlpipe.policy.frame import ArrayLike


def quantile_huber_loss(
    theta: torch.Tensor, target: torch.Tensor, kappa: float = 1.0, weight: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantile Huber loss of the quantiles ``theta`` against the samples ``target``.

    For ``u_ij = target_j - theta_i``: ``rho_ij = |tau_i - 1{u_ij < 0}| * L_kappa(u_ij) / kappa``
    with the Huber loss ``L_kappa`` (``kappa = 0``: ``|u_ij|``, plain quantile regression); a
    sample's loss is ``sum_i mean_j rho_ij`` (Dabney et al., 2018, eq. 10).

    Args:
        theta: ``[B, N]`` online quantiles of the taken actions at the midpoints ``tau_i``.
        target: ``[B, M]`` target quantiles ``r + value_gamma * (1 - terminated) * theta'``, no gradient.
        kappa: Huber threshold, ``>= 0``.
        weight: ``[B]`` importance-sampling weights, or None.

    Returns:
        ``loss`` (scalar, the weighted mean over samples) and the loss per sample ``[B]`` (no gradient).
    """
    if kappa < 0:
        raise ValueError(f"kappa must be >= 0, got {kappa}")
    n = theta.shape[1]
    tau = (torch.arange(n, device=theta.device, dtype=theta.dtype) + 0.5) / n
    u = target.unsqueeze(1) - theta.unsqueeze(2)  # [B, N, M]
    abs_u = u.abs()
    huber = abs_u  # kappa = 0: the quantile loss's |u|
    if kappa > 0:
        huber = torch.where(abs_u <= kappa, 0.5 * u.pow(2), kappa * (abs_u - 0.5 * kappa)) / kappa
    rho = (tau.view(1, -1, 1) - (u.detach() < 0).to(theta.dtype)).abs() * huber
    per_sample = rho.mean(dim=2).sum(dim=1)
    loss = per_sample.mean() if weight is None else (per_sample * weight).mean()
    return loss, per_sample.detach()


class QRDQNPolicy(DistributionalQPolicy):
    """QR-DQN on the DQN family's frame; reads ``model.num_quantiles`` and ``learn.kappa``.

    ``cfg`` is a ``PolicyConfig`` or any object with the same attributes. ``model`` maps
    observations to quantiles ``[B, A, num_quantiles]`` (default: ``DistributionalQ`` from ``cfg.model``).
    """

    def __init__(self, cfg: Any, model: nn.Module | None = None, seed: int = 0) -> None:
        num_quantiles = int(cfg.model.num_quantiles)
        self._kappa = float(cfg.learn.kappa)
        if num_quantiles < 1 or self._kappa < 0:
            raise ValueError(f"QR-DQN needs num_quantiles >= 1 and kappa >= 0, got {num_quantiles} and "
                             f"{self._kappa}")
        super().__init__(cfg, num_quantiles, model, seed)

    def q_values(self, output: torch.Tensor) -> torch.Tensor:
        """The quantiles' means ``[N, A]`` from quantiles ``[N, A, num_quantiles]``."""
        return output.mean(dim=-1)

    def _forward_learn(self, batch: Mapping[str, ArrayLike]) -> dict[str, Any]:
        """One step of :func:`quantile_huber_loss` on a columnar batch: the taken actions' quantiles
        regress on the bootstrapped quantiles ``r + gamma^k * theta'`` (no bootstrap past a terminal
        state); the loss per sample is the priority."""
        self._draw_update_noise()
        b = self._learn_batch(batch)
        discount = (b.value_gamma * (1.0 - b.terminated)).unsqueeze(-1)
        target = b.reward.unsqueeze(-1) + discount * self._bootstrap(b.next_obs)
        quantiles = self.model(b.obs)
        theta = quantiles[torch.arange(quantiles.shape[0], device=quantiles.device), b.action]
        loss, per_sample = quantile_huber_loss(theta, target, self._kappa, b.weight)
        q = self.q_values(quantiles.detach())
        loss = self._conservative(loss, quantiles, b.action)
        self._gradient_step(loss)
        return self._learn_output(loss, q, per_sample)
