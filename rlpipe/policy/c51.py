"""C51, the categorical distributional DQN (Bellemare et al., 2017, "A Distributional
Perspective on Reinforcement Learning"); with ``model.noisy``, ``model.dueling``, double-Q,
n-step returns and prioritised replay it is Rainbow (Hessel et al., 2018).

The return distribution of each action is a categorical over ``num_atoms`` atoms ``z`` evenly
spaced in ``[v_min, v_max]``. The target ``r + gamma^k z`` (no bootstrap past a terminal
state) is projected back onto ``z`` (:func:`categorical_projection`) and the loss is the
cross-entropy to it (:func:`c51_loss`).

Metrics returned by ``learn_mode.forward``:
    total_loss  cross-entropy to the projected target (importance-weighted when ``weight`` is given).
    q_value     mean online Q (the distributions' means) over the batch and all actions.
    priority    the cross-entropy per sample, np.float32 [B], for prioritised replay.
    cur_lr      learning rate of the step.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from rlpipe.policy.distributional import DistributionalQPolicy
from rlpipe.policy.frame import ArrayLike


def categorical_projection(
    next_probs: torch.Tensor,
    reward: torch.Tensor,
    terminated: torch.Tensor,
    value_gamma: torch.Tensor | float,
    support: torch.Tensor,
) -> torch.Tensor:
    """The distribution of ``r + value_gamma * (1 - terminated) * Z'`` projected onto ``support``.

    ``B`` is the batch size and ``N`` the number of atoms. Each shifted atom, clipped to
    ``[v_min, v_max]``, splits its probability between the two atoms around it in proportion
    to its closeness (Bellemare et al., 2017, eq. 7); a terminal transition puts all its mass
    around ``r``.

    Args:
        next_probs: ``[B, N]`` probabilities of the bootstrap action's distribution at ``s'``.
        reward: ``[B]`` reward (for n-step: the discounted sum of the n rewards).
        terminated: ``[B]``, 1.0 where ``s'`` is terminal (no bootstrap).
        value_gamma: ``[B]`` or a scalar: discount of the bootstrap (``gamma ** k`` for k steps).
        support: ``[N]`` atoms, evenly spaced, increasing, ``N >= 2``.

    Returns:
        ``[B, N]`` target probabilities (rows sum to the rows of ``next_probs``).
    """
    delta_z = support[1] - support[0]
    discount = (value_gamma * (1.0 - terminated)).unsqueeze(-1)
    tz = (reward.unsqueeze(-1) + discount * support).clamp(support[0].item(), support[-1].item())  # [B, N]
    closeness = (1.0 - (tz.unsqueeze(1) - support.view(1, -1, 1)).abs() / delta_z).clamp(min=0.0)  # [B, N_i, N_j]
    return (closeness * next_probs.unsqueeze(1)).sum(dim=-1)


def c51_loss(
    logits: torch.Tensor, action: torch.Tensor, target_probs: torch.Tensor, weight: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Cross-entropy of the taken actions' distributions to the projected target.

    Args:
        logits: ``[B, A, N]`` online logits at ``s``; the loss is differentiable through them.
        action: int64 ``[B]`` actions taken.
        target_probs: ``[B, N]`` projected target (:func:`categorical_projection`), no gradient.
        weight: ``[B]`` importance-sampling weights, or None.

    Returns:
        ``loss`` (scalar, the weighted mean) and the per-sample cross-entropy ``[B]`` (no gradient).
    """
    log_p = torch.log_softmax(logits[torch.arange(logits.shape[0], device=logits.device), action], dim=-1)
    cross_entropy = -(target_probs * log_p).sum(dim=-1)
    loss = cross_entropy.mean() if weight is None else (cross_entropy * weight).mean()
    return loss, cross_entropy.detach()


class C51Policy(DistributionalQPolicy):
    """C51 on the DQN family's frame; reads ``model.num_atoms``, ``model.v_min`` and ``model.v_max``.

    ``cfg`` is a ``PolicyConfig`` or any object with the same attributes. ``model`` maps
    observations to logits ``[B, A, num_atoms]`` (default: ``DistributionalQ`` from ``cfg.model``).
    """

    def __init__(self, cfg: Any, model: nn.Module | None = None, seed: int = 0) -> None:
        model_cfg = cfg.model
        num_atoms = int(model_cfg.num_atoms)
        v_min, v_max = float(model_cfg.v_min), float(model_cfg.v_max)
        if num_atoms < 2 or not v_min < v_max:
            raise ValueError(f"C51 needs num_atoms >= 2 and v_min < v_max, got {num_atoms} atoms in "
                             f"[{v_min}, {v_max}]")
        super().__init__(cfg, num_atoms, model, seed)
        self.support = torch.linspace(v_min, v_max, num_atoms, device=self._device)

    def q_values(self, output: torch.Tensor) -> torch.Tensor:
        """The distributions' means ``[N, A]`` from logits ``[N, A, num_atoms]``."""
        return (torch.softmax(output, dim=-1) * self.support).sum(dim=-1)

    def _forward_learn(self, batch: Mapping[str, ArrayLike]) -> dict[str, Any]:
        """One step of :func:`c51_loss` on a columnar batch: the bootstrap action's distribution at
        ``s'``, shifted by the return and projected onto the support, is the target of the taken
        actions' distributions; the cross-entropy per sample is the priority."""
        self._draw_update_noise()
        b = self._learn_batch(batch)
        next_probs = torch.softmax(self._bootstrap(b.next_obs), dim=-1)
        target_probs = categorical_projection(next_probs, b.reward, b.terminated, b.value_gamma, self.support)
        logits = self.model(b.obs)
        loss, cross_entropy = c51_loss(logits, b.action, target_probs, b.weight)
        q = self.q_values(logits.detach())
        loss = self._conservative(loss, logits, b.action)
        self._gradient_step(loss)
        return self._learn_output(loss, q, cross_entropy)
