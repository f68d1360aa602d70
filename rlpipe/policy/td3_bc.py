"""TD3+BC (Fujimoto & Gu, 2021, "A Minimalist Approach to Offline Reinforcement Learning").

TD3 with one change to the actor's loss: a behaviour-cloning term keeps the policy near the
dataset's actions, and the Q term is scaled so that the two stay comparable whatever the
scale of the returns::

    lambda = bc_alpha / mean_b |Q_1(s_b, mu(s_b))|      (a constant: no gradient)
    actor_loss = -lambda * mean_b Q_1(s_b, mu(s_b)) + mean_{b,j} (mu(s_b)_j - a_bj)^2

The critics, target smoothing and delayed updates are TD3's (:mod:`rlpipe.policy.td3`). The
paper normalises states by the dataset's mean and standard deviation; ``model.obs_norm`` does
the same with running statistics of the learning batches, which are drawn from the dataset.

Metrics: TD3's, and ``bc_loss`` (the behaviour-cloning term) on steps that update the actor.
"""
from __future__ import annotations

from typing import Any

import torch

from rlpipe.policy.frame import TransitionBatch
from rlpipe.policy.td3 import TD3Policy


def td3_bc_actor_loss(q_pi: torch.Tensor, action_pi: torch.Tensor, data_action: torch.Tensor,
                      bc_alpha: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The actor's loss and its behaviour-cloning term.

    ``q_pi``: ``Q_1(s, mu(s))`` ``[B]``; ``action_pi``: ``mu(s)`` and ``data_action``: the batch's
    actions, both ``[B, A]``; ``bc_alpha``: the paper's alpha (2.5). The behaviour-cloning term is the
    mean squared difference over batch and action dimensions, as the paper's code computes it.
    """
    lam = bc_alpha / q_pi.abs().mean().detach().clamp_min(1e-6)
    bc = (action_pi - data_action).square().mean()
    return -lam * q_pi.mean() + bc, bc.detach()


class TD3BCPolicy(TD3Policy):
    """TD3+BC: :class:`~rlpipe.policy.td3.TD3Policy` with :func:`td3_bc_actor_loss`; reads ``learn.bc_alpha``."""

    def __init__(self, cfg: Any, seed: int = 0) -> None:
        super().__init__(cfg, seed)
        self._bc_alpha = float(cfg.learn.bc_alpha)

    def _actor_loss(
        self, q_pi: torch.Tensor, action_pi: torch.Tensor, b: TransitionBatch
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        loss, bc = td3_bc_actor_loss(q_pi, action_pi, b.action, self._bc_alpha)
        return loss, {"bc_loss": bc}
