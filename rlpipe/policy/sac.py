"""Soft Actor-Critic (Haarnoja et al., 2018, "Soft Actor-Critic Algorithms and Applications").

Twin critics with clipped double-Q targets, a tanh-squashed Gaussian actor and, with
``auto_alpha``, a temperature ``alpha`` learned toward a target entropy. Actions are in
``[-1, 1]``; scaling to the env's bounds happens outside the policy.

One ``learn_mode.forward(batch)`` is one step of each update, in the paper's order:
critics on ``td_target = r + gamma * (1 - terminated) * (min_i Q'_i(s', a') - alpha * log_pi(a'|s'))``
with ``a' ~ pi(.|s')``; then the actor on ``alpha * log_pi(a|s) - min_i Q_i(s, a)`` with
``a ~ pi(.|s)`` (the critics just updated, their weights frozen) and, in the same backward
pass and Adam step, ``alpha`` from that sample's ``log_pi``; then a Polyak step of the
target critics. Deviation from the paper: the temperature loss is
written in ``log_alpha`` (``-log_alpha * (log_pi + target_entropy)``), as most
implementations do; it has the same fixed point and the sign of its gradient is the paper's.

Metrics returned by ``learn_mode.forward``:
    total_loss    critic_loss + actor_loss.
    critic_loss   sum over critics of 0.5 * mean squared TD error (importance-weighted with ``weight``).
    actor_loss    mean of ``alpha * log_pi - min_i Q_i(s, a)`` over the batch.
    alpha_loss    temperature loss (only with ``auto_alpha``).
    alpha         temperature used in this step.
    entropy       mean ``-log_pi`` of the actor's samples on the batch observations.
    q_value       mean ``Q_i(s, a)`` over critics and batch, for the batch actions.
    priority      ``|td_error|`` per sample, mean over the critics, np.float32 [B].
    cur_lr_actor, cur_lr_q   learning rates of the step.

The helpers under "Shared with TD3 and DDPG" are used by ``rlpipe.policy.td3`` as well.
"""
from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from rlpipe.model.continuous import EnsembleQ, SquashedGaussianActor
from rlpipe.policy.actor_critic import (
    ActorCriticPolicy,
    ArrayLike,
    check_model_cfg,
    frozen,
    soft_update_,
    target_theta_of,
    training,
)
from rlpipe.policy.frame import Observation, TransitionBatch
from rlpipe.policy.optim import gradient_step, initial_learning_rate, make_adam


# ---- the update rule ---------------------------------------------------------------
def sac_td_target(
    reward: torch.Tensor,
    terminated: torch.Tensor,
    value_gamma: torch.Tensor | float,
    target_q: torch.Tensor,
    next_log_pi: torch.Tensor,
    alpha: torch.Tensor | float,
) -> torch.Tensor:
    """Soft TD target ``[B]`` with the clipped double-Q value of ``s'``.

    Args:
        reward: ``[B]`` reward (for n-step: the discounted sum of the n rewards).
        terminated: float ``[B]``, 1.0 where ``s'`` is terminal; truncated rows have 0.0 and bootstrap.
        value_gamma: ``[B]`` or a scalar, the discount of the bootstrap value (``gamma ** k``).
        target_q: ``[n, B]`` target critics ``Q'_i(s', a')`` at ``a' ~ pi(.|s')``.
        next_log_pi: ``[B]`` ``log pi(a'|s')``.
        alpha: the temperature (scalar).
    """
    soft_value = target_q.min(dim=0).values - alpha * next_log_pi
    return reward + value_gamma * (1.0 - terminated) * soft_value


def sac_critic_loss(
    q: torch.Tensor, td_target: torch.Tensor, weight: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``sum_i 0.5 * mean_b w_b * (Q_i(s_b, a_b) - td_target_b)^2`` and ``td_error`` ``[n, B]``.

    Args:
        q: ``[n, B]`` critics at the batch actions; the loss is differentiable through it.
        td_target: ``[B]``, treated as a constant.
        weight: ``[B]`` importance-sampling weights, or None for uniform weights.

    Returns:
        ``loss`` (scalar) and ``td_error = td_target - q`` (``[n, B]``, no gradient).
    """
    td_error = td_target.detach() - q
    squared = td_error.square()
    if weight is not None:
        squared = squared * weight
    return 0.5 * squared.mean(dim=1).sum(), td_error.detach()


def sac_actor_loss(q_pi: torch.Tensor, log_pi: torch.Tensor, alpha: torch.Tensor | float) -> torch.Tensor:
    """``mean_b(alpha * log_pi - min_i Q_i(s, a))`` for reparameterised ``a ~ pi(.|s)``.

    ``q_pi`` is ``[n, B]``, ``log_pi`` ``[B]``; ``alpha`` is a constant here.
    """
    return (alpha * log_pi - q_pi.min(dim=0).values).mean()


def sac_alpha_loss(log_alpha: torch.Tensor, log_pi: torch.Tensor, target_entropy: float) -> torch.Tensor:
    """``-mean_b(log_alpha * (log_pi + target_entropy))``, differentiable in ``log_alpha`` only.

    When the policy's entropy ``-log_pi`` is below ``target_entropy`` (``log_pi`` above
    ``-target_entropy``) the gradient is negative, so a descent step raises ``alpha`` and
    the actor is pushed to explore more; above the target, ``alpha`` falls.
    """
    return -(log_alpha * (log_pi.detach() + target_entropy)).mean()


class SACPolicy(ActorCriticPolicy):
    """SAC: actor, twin critics and their targets, a temperature, one Adam per part.

    ``cfg`` is a ``PolicyConfig`` or any object with the same attributes; ``seed`` seeds
    the exploration and update-noise generators (see :meth:`seed`).
    """

    checkpointed: tuple[str, ...] = ("actor", "critic", "target_critic", "actor_optimizer", "critic_optimizer")
    actor: SquashedGaussianActor
    batch_renorm = False
    """Whether the actor and the critics batch-renormalise their layers (CrossQ)."""

    def __init__(self, cfg: Any, seed: int = 0) -> None:
        super().__init__(cfg, seed)
        learn = cfg.learn
        obs_shape, action_shape, hidden, encoder = check_model_cfg(cfg.model)
        self._auto_alpha = bool(learn.auto_alpha)
        self._target_entropy = float(-action_shape if learn.target_entropy is None else learn.target_entropy)

        self.actor = SquashedGaussianActor(obs_shape, action_shape, hidden, self.batch_renorm, **encoder)
        self.actor.to(self._device)
        layer_norm = bool(getattr(cfg.model, "critic_layer_norm", False))
        self.critic = EnsembleQ(obs_shape, action_shape, hidden, 2, self.batch_renorm, layer_norm=layer_norm,
                                **encoder).to(self._device)
        self.log_alpha = torch.tensor(
            math.log(float(learn.alpha)), device=self._device, requires_grad=self._auto_alpha
        )
        # The temperature is a second parameter group of the actor's Adam: its loss reads
        # log_pi detached, so one backward and one step serve both without mixing gradients.
        lr_actor = initial_learning_rate(learn, "learning_rate_actor")
        actor_groups = [{"params": list(self.actor.parameters()), "lr": lr_actor}]
        if self._auto_alpha:
            actor_groups.append({"params": [self.log_alpha], "lr": initial_learning_rate(learn, "learning_rate_alpha")})
        self.actor_optimizer = make_adam(actor_groups, lr_actor, self._adam_betas)
        self.critic_optimizer = make_adam(self.critic.parameters(), initial_learning_rate(learn, "learning_rate_q"),
                                          self._adam_betas)
        self._actor_params = list(self.actor.parameters())
        self._critic_params = list(self.critic.parameters())
        self._make_targets(learn)

    def _make_targets(self, learn: Any) -> None:
        """The target critics, Polyak-averaged at ``learn.target_theta``."""
        self._target_theta = target_theta_of(learn)
        self.target_critic = copy.deepcopy(self.critic).requires_grad_(False)
        self._target_params = list(self.target_critic.parameters())

    def learning_rate_groups(self) -> dict[str, list[dict[str, Any]]]:
        """The actor's group, the temperature's (the actor optimizer's second, with ``auto_alpha``) and the critics'."""
        actor_groups = self.actor_optimizer.param_groups
        return {"learning_rate_actor": actor_groups[:1], "learning_rate_alpha": actor_groups[1:],
                "learning_rate_q": self.critic_optimizer.param_groups}

    @property
    def alpha(self) -> float:
        return float(self.log_alpha.detach().exp())

    # ---- learning ----------------------------------------------------------------
    def _forward_learn(self, batch: Mapping[str, ArrayLike]) -> dict[str, Any]:
        """One step of the critics, the actor, the temperature and the target critics."""
        b = self._learn_batch(batch)
        alpha = self.log_alpha.detach().exp()

        with torch.no_grad():
            next_action, next_log_pi = self.actor.sample(b.next_obs, self._rng.learn)
            target_q = self.target_critic(b.next_obs, next_action)
            td_target = sac_td_target(b.reward, b.terminated, b.value_gamma, target_q, next_log_pi, alpha)
        q = self.critic(b.obs, b.action)
        critic_loss, td_error = sac_critic_loss(q, td_target, b.weight)
        penalties = self._critic_penalties(b, q)
        for penalty in penalties.values():
            critic_loss = critic_loss + penalty
        gradient_step(self.critic_optimizer, self._critic_params, critic_loss, self._grad_clip)
        actor_metrics = self._actor_step(b.obs, alpha)
        soft_update_(self._target_params, self._critic_params, self._target_theta)
        self._train_iter += 1
        return self._learn_output(critic_loss, q, td_error, alpha, actor_metrics, penalties)

    def _critic_penalties(self, b: TransitionBatch, q: torch.Tensor) -> dict[str, torch.Tensor]:
        """Terms added to the critics' loss, by metric name (none in SAC; CQL's conservative penalty)."""
        return {}

    def _actor_step(self, obs: Observation, alpha: torch.Tensor) -> list[torch.Tensor]:
        """One step of the actor on ``alpha * log_pi - min_i Q_i`` (critics just updated, their
        weights frozen) and, with ``auto_alpha``, of the temperature in the same backward pass
        and Adam step. Returns ``[actor_loss, entropy]`` (``+ [alpha_loss]``), detached."""
        with frozen(self.critic), training(self.actor):
            action_pi, log_pi = self.actor.sample(obs, self._rng.learn)
            actor_loss = sac_actor_loss(self.critic(obs, action_pi), log_pi, alpha)
            metrics = [actor_loss.detach(), -log_pi.detach().mean()]
            if self._auto_alpha:
                alpha_loss = sac_alpha_loss(self.log_alpha, log_pi, self._target_entropy)
                metrics.append(alpha_loss.detach())
                actor_loss = actor_loss + alpha_loss  # disjoint parameters: the same gradients as two steps
            gradient_step(self.actor_optimizer, self._actor_params, actor_loss, self._grad_clip)
        return metrics

    def _learn_output(
        self,
        critic_loss: torch.Tensor,
        q: torch.Tensor,
        td_error: torch.Tensor,
        alpha: torch.Tensor,
        actor_metrics: list[torch.Tensor],
        penalties: Mapping[str, torch.Tensor] | None = None,
    ) -> dict[str, Any]:
        """The metrics of one update (the module docstring lists them); the actor's only when
        ``actor_metrics`` (from :meth:`_actor_step`) is not empty; each of ``penalties`` (terms of the
        critics' loss) under its name."""
        penalties = penalties or {}
        values = torch.stack([critic_loss.detach(), q.detach().mean(), alpha, *actor_metrics,
                              *(p.detach() for p in penalties.values())]).tolist()
        out = {
            "total_loss": values[0] + (values[3] if actor_metrics else 0.0),
            "critic_loss": values[0],
            "q_value": values[1],
            "alpha": values[2],
            "priority": td_error.abs().mean(dim=0).cpu().numpy(),
            "cur_lr_actor": self.actor_optimizer.param_groups[0]["lr"],
            "cur_lr_q": self.critic_optimizer.param_groups[0]["lr"],
        }
        if actor_metrics:
            out["actor_loss"], out["entropy"] = values[3], values[4]
            if self._auto_alpha:
                out["alpha_loss"] = values[5]
        out.update(zip(penalties, values[len(values) - len(penalties):], strict=True))
        return out

    # ---- acting ------------------------------------------------------------------
    @torch.inference_mode()
    def _forward_collect(self, obs: ArrayLike, **ignored: Any) -> np.ndarray:
        """A sample of the squashed Gaussian, np.float32 ``[N, action_dim]`` in ``[-1, 1]``.

        Extra keyword arguments (the pipeline's ``eps``) are accepted and ignored.
        """
        action, _ = self.actor.sample(self._obs(obs), self._rng.collect)
        return action.cpu().numpy()

    # ---- checkpointing -----------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Networks, optimizers (the temperature's Adam state is in the actor's), temperature,
        update counter and both generators' states."""
        return {**super().state_dict(), "log_alpha": self.log_alpha.detach()}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore everything :meth:`state_dict` returned."""
        super().load_state_dict(state_dict)
        with torch.no_grad():
            self.log_alpha.copy_(state_dict["log_alpha"])
