"""TD3 (Fujimoto et al., 2018) and DDPG (Lillicrap et al., 2016): deterministic actor-critic.

TD3 adds three things to DDPG, and ``DDPGPolicy`` is the same machinery with all three off:
    clipped double Q       twin critics; ``td_target = r + gamma * (1 - terminated) * min_i Q'_i(s', a')``.
    target smoothing       ``a' = clip(mu'(s') + clip(eps, -noise_clip, noise_clip), -1, 1)``,
                           ``eps ~ N(0, noise_sigma^2)``.
    delayed actor updates  the actor (on ``-Q_1(s, mu(s))``) and the Polyak steps of both
                           targets every ``actor_update_freq`` critic updates.
Actions are in ``[-1, 1]``; exploration adds ``N(0, collect.noise_sigma^2)`` to ``mu(s)`` and
clips. Deviation from the DDPG paper: Gaussian rather than Ornstein-Uhlenbeck exploration
noise, and no critic weight decay (the "DDPG" of the TD3 paper's experiments).

Metrics returned by ``learn_mode.forward``:
    total_loss    critic_loss, plus actor_loss on steps that update the actor.
    critic_loss   sum over critics of the mean squared TD error (importance-weighted with ``weight``).
    actor_loss    ``-mean Q_1(s, mu(s))``, only on steps that update the actor.
    q_value       mean ``Q_i(s, a)`` over critics and batch, for the batch actions.
    priority      ``|td_error|`` per sample, mean over the critics, np.float32 [B].
    cur_lr_actor, cur_lr_q   learning rates of the step.
"""
from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from rlpipe.model.continuous import DeterministicActor, EnsembleQ
from rlpipe.policy.actor_critic import (
    ActorCriticPolicy,
    ArrayLike,
    check_model_cfg,
    explore_with_noise,
    frozen,
    gaussian_noise,
    soft_update_,
    target_theta_of,
)
from rlpipe.policy.frame import TransitionBatch
from rlpipe.policy.optim import gradient_step, initial_learning_rate, make_adam


# ---- the update rule ---------------------------------------------------------------
def td3_target_action(next_action: torch.Tensor, noise: torch.Tensor, noise_clip: float) -> torch.Tensor:
    """Target policy smoothing: ``clip(mu'(s') + clip(noise, -noise_clip, noise_clip), -1, 1)``.

    ``next_action`` is the target actor's ``mu'(s')`` and ``noise`` the drawn ``eps``, both ``[B, A]``.
    """
    return (next_action + noise.clamp(-noise_clip, noise_clip)).clamp(-1.0, 1.0)


def td3_td_target(
    reward: torch.Tensor, terminated: torch.Tensor, value_gamma: torch.Tensor | float, target_q: torch.Tensor
) -> torch.Tensor:
    """``r + value_gamma * (1 - terminated) * min_i Q'_i(s', a')`` ``[B]``.

    ``target_q`` is ``[n, B]`` (DDPG: ``n = 1``); ``terminated`` is float ``[B]``, 0.0 on
    truncated rows so that they bootstrap; ``value_gamma`` is ``[B]`` or a scalar.
    """
    return reward + value_gamma * (1.0 - terminated) * target_q.min(dim=0).values


def td3_critic_loss(
    q: torch.Tensor, td_target: torch.Tensor, weight: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``sum_i mean_b w_b * (td_target_b - Q_i(s_b, a_b))^2`` and ``td_error`` ``[n, B]`` (no gradient).

    ``q`` is ``[n, B]``, ``td_target`` ``[B]`` (a constant), ``weight`` ``[B]`` or None.
    """
    td_error = td_target.detach() - q
    squared = td_error.square()
    if weight is not None:
        squared = squared * weight
    return squared.mean(dim=1).sum(), td_error.detach()


def td3_actor_loss(q_pi: torch.Tensor) -> torch.Tensor:
    """Deterministic policy gradient loss ``-mean_b Q_1(s_b, mu(s_b))``; ``q_pi`` is ``[B]``."""
    return -q_pi.mean()


# ---- the policies ------------------------------------------------------------------
class DeterministicActorCritic(ActorCriticPolicy):
    """Actor, ``n_critics`` critics, a target of each, one Adam for the actor and one for the critics.

    The shared machinery of :class:`TD3Policy` and :class:`DDPGPolicy`; they choose the
    TD3 features (``n_critics``, ``actor_update_freq``, the smoothing noise) from ``cfg``.
    """

    checkpointed = ("actor", "critic", "target_actor", "target_critic", "actor_optimizer", "critic_optimizer")

    def __init__(
        self,
        cfg: Any,
        seed: int,
        n_critics: int,
        actor_update_freq: int,
        noise_sigma: float,
        noise_clip: float,
    ) -> None:
        super().__init__(cfg, seed)
        learn = cfg.learn
        obs_shape, action_shape, hidden, encoder = check_model_cfg(cfg.model)
        if actor_update_freq <= 0:
            raise ValueError(f"actor_update_freq must be positive, got {actor_update_freq}")
        self._actor_update_freq = int(actor_update_freq)
        self._noise_sigma, self._noise_clip = float(noise_sigma), float(noise_clip)
        self._explore_sigma = float(cfg.collect.noise_sigma)
        self._target_theta = target_theta_of(learn)

        self.actor = DeterministicActor(obs_shape, action_shape, hidden, **encoder).to(self._device)
        self.critic = EnsembleQ(obs_shape, action_shape, hidden, n_critics, **encoder).to(self._device)
        self.target_actor = copy.deepcopy(self.actor).requires_grad_(False)
        self.target_critic = copy.deepcopy(self.critic).requires_grad_(False)
        self.actor_optimizer = make_adam(self.actor.parameters(), initial_learning_rate(learn, "learning_rate_actor"),
                                         self._adam_betas)
        self.critic_optimizer = make_adam(self.critic.parameters(), initial_learning_rate(learn, "learning_rate_q"),
                                          self._adam_betas)
        self._actor_params = list(self.actor.parameters())
        self._critic_params = list(self.critic.parameters())
        self._targets = [*self.target_actor.parameters(), *self.target_critic.parameters()]
        self._onlines = [*self._actor_params, *self._critic_params]

    def learning_rate_groups(self) -> dict[str, list[dict[str, Any]]]:
        return {"learning_rate_actor": self.actor_optimizer.param_groups,
                "learning_rate_q": self.critic_optimizer.param_groups}

    # ---- learning ----------------------------------------------------------------
    def _forward_learn(self, batch: Mapping[str, ArrayLike]) -> dict[str, Any]:
        """One critic step; every ``actor_update_freq``-th call also an actor step and target updates."""
        b = self._learn_batch(batch)

        with torch.no_grad():
            next_action = self.target_actor(b.next_obs)
            if self._noise_sigma > 0.0:
                noise = gaussian_noise(next_action, self._noise_sigma, self._rng.learn)
                next_action = td3_target_action(next_action, noise, self._noise_clip)
            target_q = self.target_critic(b.next_obs, next_action)
            td_target = td3_td_target(b.reward, b.terminated, b.value_gamma, target_q)
        q = self.critic(b.obs, b.action)
        critic_loss, td_error = td3_critic_loss(q, td_target, b.weight)
        gradient_step(self.critic_optimizer, self._critic_params, critic_loss, self._grad_clip)
        self._train_iter += 1

        metrics = [critic_loss.detach(), q.detach().mean()]
        update_actor = self._train_iter % self._actor_update_freq == 0
        if update_actor:
            with frozen(self.critic):
                action_pi = self.actor(b.obs)
                q_pi = self.critic(b.obs, action_pi, members=1)[0]  # Q_1 only
                actor_loss, actor_terms = self._actor_loss(q_pi, action_pi, b)
                gradient_step(self.actor_optimizer, self._actor_params, actor_loss, self._grad_clip)
            soft_update_(self._targets, self._onlines, self._target_theta)
            metrics += [actor_loss.detach(), *actor_terms.values()]

        values = torch.stack(metrics).tolist()  # one device-to-host copy for all the floats
        out = {
            "total_loss": values[0] + (values[2] if update_actor else 0.0),
            "critic_loss": values[0],
            "q_value": values[1],
            "priority": td_error.abs().mean(dim=0).cpu().numpy(),
            "cur_lr_actor": self.actor_optimizer.param_groups[0]["lr"],
            "cur_lr_q": self.critic_optimizer.param_groups[0]["lr"],
        }
        if update_actor:
            out["actor_loss"] = values[2]
            out.update(zip(actor_terms, values[3:], strict=True))
        return out

    def _actor_loss(
        self, q_pi: torch.Tensor, action_pi: torch.Tensor, b: TransitionBatch
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The actor's loss from ``Q_1(s, mu(s))`` ``[B]`` (TD3+BC also reads ``mu(s)`` and the batch's
        actions), and the named terms of it to report (detached scalars)."""
        return td3_actor_loss(q_pi), {}

    # ---- acting ------------------------------------------------------------------
    @torch.inference_mode()
    def _forward_collect(self, obs: ArrayLike, **ignored: Any) -> np.ndarray:
        """``clip(mu(s) + N(0, collect.noise_sigma^2), -1, 1)``, np.float32 ``[N, action_dim]``.

        Extra keyword arguments (the pipeline's ``eps``) are accepted and ignored.
        """
        return explore_with_noise(self.actor(self._obs(obs)), self._explore_sigma, self._rng.collect).cpu().numpy()


class TD3Policy(DeterministicActorCritic):
    """TD3: twin critics, target policy smoothing and delayed actor updates, from ``cfg.learn``.

    Reads ``actor_update_freq``, ``noise_sigma`` and ``noise_clip`` besides the fields DDPG reads.
    """

    def __init__(self, cfg: Any, seed: int = 0) -> None:
        learn = cfg.learn
        super().__init__(
            cfg, seed, n_critics=2, actor_update_freq=int(learn.actor_update_freq),
            noise_sigma=float(learn.noise_sigma), noise_clip=float(learn.noise_clip),
        )


class DDPGPolicy(DeterministicActorCritic):
    """DDPG: one critic, no target smoothing, actor and targets updated every step.

    The TD3-only fields of ``cfg.learn`` are not read.
    """

    def __init__(self, cfg: Any, seed: int = 0) -> None:
        super().__init__(cfg, seed, n_critics=1, actor_update_freq=1, noise_sigma=0.0, noise_clip=0.0)
