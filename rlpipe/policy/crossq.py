"""CrossQ (Bhatt et al., ICLR 2024, "CrossQ: Batch Normalization in Deep Reinforcement
Learning for Greater Sample Efficiency and Simplicity"): SAC without target networks, with
batch renormalisation (:class:`~rlpipe.model.batch_renorm.BatchRenorm`) in the critics and
the actor.

One ``learn_mode.forward(batch)`` is one critic step and, every ``learn.actor_update_freq``-th
call, one step of the actor and the temperature (SAC's losses, :mod:`rlpipe.policy.sac`):

- critics: ``(s, a)`` and ``(s', a')``, ``a' ~ pi(.|s')``, go through the critics as **one**
  batch of ``2B`` rows in training mode, so that each layer normalises both halves with the
  same statistics; the soft TD target is computed from the ``s'`` half, as a constant. (Two
  passes would normalise ``Q(s', a')`` by statistics of other actions than ``Q(s, a)``'s,
  and without a target network the two would drift apart.)
- actor: the actor in training mode, the critics in eval mode (running statistics).

Acting, evaluation and ``a'`` use the actor's running statistics (eval mode). Metrics are
SAC's; ``actor_loss``, ``entropy`` and ``alpha_loss`` only on the calls that update the actor.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from rlpipe.policy.actor_critic import ArrayLike, training
from rlpipe.policy.frame import joined
from rlpipe.policy.optim import gradient_step
from rlpipe.policy.sac import SACPolicy, sac_critic_loss, sac_td_target


class CrossQPolicy(SACPolicy):
    """CrossQ: SAC's actor, critics and temperature, batch-renormalised, with no targets.

    Reads SAC's fields of ``cfg`` and ``learn.actor_update_freq`` (the paper's policy delay, 3);
    ``learn.target_theta`` is not read. ``learn.adam_betas`` of ``[0.5, 0.999]`` is the paper's.
    """

    checkpointed = ("actor", "critic", "actor_optimizer", "critic_optimizer")
    batch_renorm = True

    def __init__(self, cfg: Any, seed: int = 0) -> None:
        super().__init__(cfg, seed)
        self._actor_update_freq = int(cfg.learn.actor_update_freq)
        if self._actor_update_freq <= 0:
            raise ValueError(f"cfg.learn.actor_update_freq must be positive, got {self._actor_update_freq}")
        self.actor.eval()  # training mode only inside the update steps
        self.critic.eval()

    def _make_targets(self, learn: Any) -> None:
        """None: CrossQ bootstraps from the critics themselves."""

    def _forward_learn(self, batch: Mapping[str, ArrayLike]) -> dict[str, Any]:
        """One critic step on the joint ``(s, a) | (s', a')`` batch; every ``actor_update_freq``-th
        call also an actor and temperature step."""
        b = self._learn_batch(batch)
        alpha = self.log_alpha.detach().exp()

        with torch.no_grad():
            next_action, next_log_pi = self.actor.sample(b.next_obs, self._rng.learn)
        with training(self.critic):
            q_joint = self.critic(joined(b.obs, b.next_obs), torch.cat([b.action, next_action]))
        q, next_q = q_joint.split(b.reward.shape[0], dim=1)
        td_target = sac_td_target(b.reward, b.terminated, b.value_gamma, next_q.detach(), next_log_pi, alpha)
        critic_loss, td_error = sac_critic_loss(q, td_target, b.weight)
        gradient_step(self.critic_optimizer, self._critic_params, critic_loss, self._grad_clip)
        self._train_iter += 1

        update_actor = self._train_iter % self._actor_update_freq == 0
        actor_metrics = self._actor_step(b.obs, alpha) if update_actor else []
        return self._learn_output(critic_loss, q, td_error, alpha, actor_metrics)
