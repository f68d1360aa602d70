"""Intrinsic curiosity module (Pathak et al., 2017, "Curiosity-driven Exploration by
Self-supervised Prediction"), for discrete actions.

An encoder maps observations to features. An inverse model predicts the action from the
features of ``s`` and ``s'``, which teaches the encoder to keep what the agent controls; a
forward model predicts the features of ``s'`` from those of ``s`` and the action. The
forward model's error is the bonus: transitions the agent cannot predict yet are worth
visiting.
"""
from __future__ import annotations

from typing import Any

import torch
from gymnasium import spaces
from torch import nn
from torch.nn import functional

from rlpipe.model.encoders import ObsShape, mlp
from rlpipe.reward_model.intrinsic import IntrinsicRewardModel, Transitions, observation_network

FORWARD_LOSS_WEIGHT = 0.2
"""``beta`` of the paper: loss = (1 - beta) * inverse loss + beta * forward loss."""


class IcmRewardModel(IntrinsicRewardModel):
    """ICM bonus: ``0.5 * ||forward(phi(s), a) - phi(s')||^2`` (mean over feature dims), running-std scaled.

    ``cfg`` reads ``intrinsic_reward_weight``, ``learning_rate``, ``obs_norm``, the encoder's
    settings (``encoder``, ``encoder_kwargs``, ``encoder_hidden_size_list``; the first two may be
    absent) and ``feature_size``; ``n_actions`` is the size of the
    env's ``Discrete`` action space. The forward loss does not train the encoder (its
    target features are detached), as in the paper, so features cannot collapse to make
    prediction trivial.
    """

    def __init__(self, cfg: Any, obs_shape: ObsShape | spaces.Space[Any], n_actions: int) -> None:
        super().__init__(cfg, obs_shape)
        hidden, feature_size = list(cfg.encoder_hidden_size_list), int(cfg.feature_size)
        self.n_actions = int(n_actions)
        last_hidden = hidden[-1] if hidden else feature_size
        self.encoder = observation_network(self._obs_space, cfg, feature_size)
        self.inverse = mlp(2 * feature_size, [last_hidden], self.n_actions)
        self.forward_model = mlp(feature_size + self.n_actions, [last_hidden], feature_size)
        self._make_optimizer()

    def networks(self) -> dict[str, nn.Module]:
        return {"encoder": self.encoder, "inverse": self.inverse, "forward_model": self.forward_model}

    def _forward_error(self, batch: Transitions) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Forward error ``[B]`` and the features of ``s`` and ``s'``."""
        phi, next_phi = self.encoder(batch.obs), self.encoder(batch.next_obs)
        action = functional.one_hot(batch.action.long().reshape(-1), self.n_actions).to(phi.dtype)
        predicted = self.forward_model(torch.cat([phi, action], dim=-1))
        return 0.5 * (predicted - next_phi.detach()).square().mean(dim=-1), phi, next_phi

    def bonus(self, batch: Transitions) -> torch.Tensor:
        return self._forward_error(batch)[0]

    def loss(self, batch: Transitions) -> tuple[torch.Tensor, torch.Tensor]:
        error, phi, next_phi = self._forward_error(batch)
        logits = self.inverse(torch.cat([phi, next_phi], dim=-1))
        inverse_loss = functional.cross_entropy(logits, batch.action.long().reshape(-1))
        loss = (1.0 - FORWARD_LOSS_WEIGHT) * inverse_loss + FORWARD_LOSS_WEIGHT * error.mean()
        return loss, error.detach()
