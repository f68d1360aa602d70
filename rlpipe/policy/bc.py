"""Behaviour cloning: a deterministic actor regressed onto the dataset's actions.

``bc_loss = mean_{b,j} (mu(s_b)_j - a_bj)^2`` (the baseline of the offline papers; no critic, no
reward). Acting adds ``N(0, collect.noise_sigma^2)`` to ``mu(s)`` as TD3 does; evaluation takes
``mu(s)``.

Metrics returned by ``learn_mode.forward``: ``total_loss`` (= ``bc_loss``), ``bc_loss``, ``cur_lr_actor``.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from rlpipe.model.continuous import DeterministicActor
from rlpipe.policy.actor_critic import ActorCriticPolicy, ArrayLike, check_model_cfg, explore_with_noise
from rlpipe.policy.optim import gradient_step, initial_learning_rate, make_adam


def bc_loss(action_pi: torch.Tensor, data_action: torch.Tensor) -> torch.Tensor:
    """Mean squared difference of the actor's actions and the data's, ``[B, A]`` each."""
    return (action_pi - data_action).square().mean()


class BCPolicy(ActorCriticPolicy):
    """An actor and its Adam (``learn.learning_rate_actor``); see the module docstring."""

    checkpointed = ("actor", "actor_optimizer")

    def __init__(self, cfg: Any, seed: int = 0) -> None:
        super().__init__(cfg, seed)
        obs_shape, action_shape, hidden, encoder = check_model_cfg(cfg.model)
        self._explore_sigma = float(cfg.collect.noise_sigma)
        self.actor = DeterministicActor(obs_shape, action_shape, hidden, **encoder).to(self._device)
        lr = initial_learning_rate(cfg.learn, "learning_rate_actor")
        self.actor_optimizer = make_adam(self.actor.parameters(), lr, self._adam_betas)
        self._actor_params = list(self.actor.parameters())

    def learning_rate_groups(self) -> dict[str, list[dict[str, Any]]]:
        return {"learning_rate_actor": self.actor_optimizer.param_groups}

    def _forward_learn(self, batch: Mapping[str, ArrayLike]) -> dict[str, Any]:
        b = self._learn_batch(batch)
        loss = bc_loss(self.actor(b.obs), b.action)
        gradient_step(self.actor_optimizer, self._actor_params, loss, self._grad_clip)
        self._train_iter += 1
        value = loss.item()
        return {"total_loss": value, "bc_loss": value, "cur_lr_actor": self.actor_optimizer.param_groups[0]["lr"]}

    @torch.inference_mode()
    def _forward_collect(self, obs: ArrayLike, **ignored: Any) -> np.ndarray:
        """``clip(mu(s) + N(0, collect.noise_sigma^2), -1, 1)``, np.float32 ``[N, action_dim]``."""
        return explore_with_noise(self.actor(self._obs(obs)), self._explore_sigma, self._rng.collect).cpu().numpy()
