"""Deep Q-learning (Mnih et al., 2015) with double-Q targets (van Hasselt et al., 2016).

``dqn_td_loss`` is the update rule as a pure function of tensors; ``DQNPolicy`` gives the
DQN family's frame (:mod:`rlpipe.policy.q_learning`: online and target networks, optimizer,
target updates, epsilon-greedy acting) its network and its learning step.

Metrics returned by ``learn_mode.forward``:
    total_loss  Huber TD loss of the step (importance-weighted when ``weight`` is given).
    q_value     mean online Q over the batch and all actions.
    priority    ``|td_error|`` per sample, np.float32 [B], for prioritised replay.
    cur_lr      learning rate of the step.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from rlpipe.model import DQN
from rlpipe.policy.frame import ArrayLike, model_shapes
from rlpipe.policy.q_learning import QLearningPolicy


def dqn_td_loss(
    q: torch.Tensor,
    q_next_online: torch.Tensor | None,
    q_next_target: torch.Tensor,
    action: torch.Tensor,
    reward: torch.Tensor,
    terminated: torch.Tensor,
    value_gamma: torch.Tensor | float,
    weight: torch.Tensor | None = None,
    double_q: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Huber TD loss of one batch and the per-sample TD errors.

    ``B`` is the batch size and ``A`` the number of actions.

    Args:
        q: ``[B, A]`` online ``Q(s, .)``; the loss is differentiable through it.
        q_next_online: ``[B, A]`` online ``Q(s', .)``, used to pick the bootstrap action
            when ``double_q``; may be None otherwise.
        q_next_target: ``[B, A]`` target-network ``Q(s', .)``.
        action: int64 ``[B]`` actions taken in ``s``.
        reward: float ``[B]`` reward (for n-step: the discounted sum of the n rewards).
        terminated: float ``[B]``, 1.0 where ``s'`` is terminal (no bootstrap); a truncated
            transition has 0.0 here and is bootstrapped.
        value_gamma: float ``[B]`` or a scalar: discount applied to the bootstrap value
            (``gamma ** k`` for a k-step return).
        weight: float ``[B]`` importance-sampling weights, or None for uniform weights.
        double_q: pick ``a' = argmax q_next_online`` and evaluate it with the target
            network; otherwise bootstrap from ``max q_next_target``.

    Returns:
        ``loss`` (scalar) and ``td_error = td_target - Q(s, a)`` (``[B]``, no gradient).
    """
    q_sa = q.gather(1, action.unsqueeze(1)).squeeze(1)
    if double_q:
        if q_next_online is None:
            raise ValueError("double_q needs q_next_online (online Q of the next observations)")
        next_action = q_next_online.argmax(dim=1, keepdim=True)
        q_next = q_next_target.gather(1, next_action).squeeze(1)
    else:
        q_next = q_next_target.max(dim=1).values
    td_target = (reward + value_gamma * (1.0 - terminated) * q_next).detach()
    if weight is None:
        loss = nn.functional.smooth_l1_loss(q_sa, td_target)
    else:
        loss = (nn.functional.smooth_l1_loss(q_sa, td_target, reduction="none") * weight).mean()
    return loss, td_target - q_sa.detach()


class DQNPolicy(QLearningPolicy):
    """DQN: the :class:`~rlpipe.policy.q_learning.QLearningPolicy` frame with a linear or dueling
    head and the Huber TD loss with (``learn.double_q``) double-Q targets.

    ``cfg`` is a ``PolicyConfig`` or any object with the same attributes. ``model`` defaults to
    ``DQN`` built from ``cfg.model``. ``seed`` seeds the exploration generator (see :meth:`seed`).
    """

    def build_model(self, model_cfg: Any) -> nn.Module:
        obs_shape, action_shape = model_shapes(model_cfg)
        return DQN(
            obs_shape,
            action_shape,
            encoder_hidden_size_list=model_cfg.encoder_hidden_size_list,
            dueling=model_cfg.dueling,
            encoder=getattr(model_cfg, "encoder", "auto"),
            encoder_kwargs=getattr(model_cfg, "encoder_kwargs", None),
        )

    def _forward_learn(self, batch: Mapping[str, ArrayLike]) -> dict[str, Any]:
        """One step of :func:`dqn_td_loss` on a columnar batch; the priority is ``|td_error|``."""
        b = self._learn_batch(batch)
        with torch.no_grad():
            q_next_target = self.target_model(b.next_obs)
            q_next_online = self.model(b.next_obs) if self._double_q else None
        q = self.model(b.obs)
        loss, td_error = dqn_td_loss(
            q, q_next_online, q_next_target, b.action, b.reward, b.terminated, b.value_gamma, b.weight, self._double_q
        )
        priority = td_error.abs()
        loss = self._conservative(loss, q, b.action)
        self._gradient_step(loss)
        return self._learn_output(loss, q, priority)
