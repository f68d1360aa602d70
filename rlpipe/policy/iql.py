"""Implicit Q-learning (Kostrikov, Nair & Levine, 2022, "Offline Reinforcement Learning with Implicit
Q-Learning").

IQL never evaluates an action outside the data. One update, in the paper's order:

    value    V(s) toward an upper expectile of the target critics at the data's actions:
             L_V = mean_b |tau - 1(u_b < 0)| * u_b^2,  u = min_i Q'_i(s, a) - V(s)
    critics  Q_i(s, a) toward r + gamma * (1 - terminated) * V(s')   (V as it just became)
    actor    advantage-weighted regression on the data's actions:
             L_pi = -mean_b exp(min(beta * (min_i Q'_i(s, a) - V(s)), log 100)) * log pi(a_b | s_b)
    targets  a Polyak step of the target critics.

``tau`` is ``learn.expectile`` (0.7 for locomotion), ``beta`` is ``learn.temperature`` (3.0).
The policy is a Gaussian with a tanh mean and a state-independent std
(:class:`~rlpipe.model.continuous.GaussianActor`); it acts with its mean, and samples (clipped to
``[-1, 1]``) when collecting, which is how IQL fine-tunes online.

Metrics returned by ``learn_mode.forward``: ``total_loss`` (sum of the three), ``value_loss``,
``critic_loss``, ``actor_loss``, ``q_value``, ``v_value``, ``advantage`` (mean), ``priority``
(``|td_error|`` mean over the critics), ``cur_lr_actor``, ``cur_lr_q``.
"""
from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from rlpipe.model.continuous import EnsembleQ, GaussianActor, StateValue
from rlpipe.policy.actor_critic import ActorCriticPolicy, ArrayLike, check_model_cfg, soft_update_, target_theta_of
from rlpipe.policy.optim import gradient_step, initial_learning_rate, make_adam

EXP_ADVANTAGE_MAX = 100.0
"""The advantage weights are clipped at this (the paper's code), so one large advantage cannot dominate."""


def expectile_loss(diff: torch.Tensor, expectile: float) -> torch.Tensor:
    """``mean |expectile - 1(diff < 0)| * diff^2`` of ``diff = Q - V`` ``[B]``: above 0.5 it weighs
    the cases where V is below Q more, so V moves toward an upper expectile of Q."""
    weight = torch.where(diff < 0, 1.0 - expectile, expectile)
    return (weight * diff.square()).mean()


def awr_weights(advantage: torch.Tensor, temperature: float) -> torch.Tensor:
    """``min(exp(temperature * advantage), EXP_ADVANTAGE_MAX)`` ``[B]`` (a constant)."""
    return torch.exp((temperature * advantage.detach()).clamp(max=math.log(EXP_ADVANTAGE_MAX)))


class IQLPolicy(ActorCriticPolicy):
    """IQL: twin critics and their targets, a value network, a Gaussian actor; Adam for each
    (``learning_rate_q`` for the critics and the value network)."""

    checkpointed = ("actor", "critic", "target_critic", "value", "actor_optimizer", "critic_optimizer",
                    "value_optimizer")
    actor: GaussianActor

    def __init__(self, cfg: Any, seed: int = 0) -> None:
        super().__init__(cfg, seed)
        learn = cfg.learn
        obs_shape, action_shape, hidden, encoder = check_model_cfg(cfg.model)
        self._expectile, self._temperature = float(learn.expectile), float(learn.temperature)
        if not 0.0 < self._expectile < 1.0:
            raise ValueError(f"cfg.learn.expectile must be in (0, 1), got {self._expectile}")
        self._target_theta = target_theta_of(learn)
        self.actor = GaussianActor(obs_shape, action_shape, hidden, **encoder).to(self._device)
        self.critic = EnsembleQ(obs_shape, action_shape, hidden, 2, **encoder).to(self._device)
        self.value = StateValue(obs_shape, hidden, **encoder).to(self._device)
        self.target_critic = copy.deepcopy(self.critic).requires_grad_(False)
        lr_q = initial_learning_rate(learn, "learning_rate_q")
        self.actor_optimizer = make_adam(self.actor.parameters(), initial_learning_rate(learn, "learning_rate_actor"),
                                         self._adam_betas)
        self.critic_optimizer = make_adam(self.critic.parameters(), lr_q, self._adam_betas)
        self.value_optimizer = make_adam(self.value.parameters(), lr_q, self._adam_betas)
        self._actor_params = list(self.actor.parameters())
        self._critic_params = list(self.critic.parameters())
        self._value_params = list(self.value.parameters())
        self._target_params = list(self.target_critic.parameters())

    def learning_rate_groups(self) -> dict[str, list[dict[str, Any]]]:
        return {"learning_rate_actor": self.actor_optimizer.param_groups,
                "learning_rate_q": [*self.critic_optimizer.param_groups, *self.value_optimizer.param_groups]}

    def _forward_learn(self, batch: Mapping[str, ArrayLike]) -> dict[str, Any]:
        """One step of the value network, the critics and the actor, then the target critics."""
        b = self._learn_batch(batch)
        with torch.no_grad():
            target_q = self.target_critic(b.obs, b.action).min(dim=0).values
        v = self.value(b.obs)
        advantage = target_q - v
        value_loss = expectile_loss(advantage, self._expectile)
        gradient_step(self.value_optimizer, self._value_params, value_loss, self._grad_clip)

        with torch.no_grad():
            td_target = b.reward + b.value_gamma * (1.0 - b.terminated) * self.value(b.next_obs)
        q = self.critic(b.obs, b.action)
        td_error = td_target - q
        squared = td_error.square() if b.weight is None else td_error.square() * b.weight
        critic_loss = squared.mean(dim=1).sum()
        gradient_step(self.critic_optimizer, self._critic_params, critic_loss, self._grad_clip)

        weights = awr_weights(advantage, self._temperature)
        actor_loss = -(weights * self.actor.log_prob(b.obs, b.action)).mean()
        gradient_step(self.actor_optimizer, self._actor_params, actor_loss, self._grad_clip)
        soft_update_(self._target_params, self._critic_params, self._target_theta)
        self._train_iter += 1

        values = torch.stack([value_loss.detach(), critic_loss.detach(), actor_loss.detach(), q.detach().mean(),
                              v.detach().mean(), advantage.detach().mean()]).tolist()
        return {
            "total_loss": values[0] + values[1] + values[2], "value_loss": values[0], "critic_loss": values[1],
            "actor_loss": values[2], "q_value": values[3], "v_value": values[4], "advantage": values[5],
            "priority": td_error.detach().abs().mean(dim=0).cpu().numpy(),
            "cur_lr_actor": self.actor_optimizer.param_groups[0]["lr"],
            "cur_lr_q": self.critic_optimizer.param_groups[0]["lr"],
        }

    @torch.inference_mode()
    def _forward_collect(self, obs: ArrayLike, **ignored: Any) -> np.ndarray:
        """A sample of the Gaussian policy clipped to ``[-1, 1]``, np.float32 ``[N, action_dim]``."""
        return self.actor.sample(self._obs(obs), self._rng.collect).cpu().numpy()
