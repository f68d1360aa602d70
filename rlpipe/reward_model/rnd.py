"""Random network distillation (Burda et al., 2018, "Exploration by Random Network Distillation").

A fixed, randomly initialised target network maps an observation to a feature vector; a
predictor network learns to reproduce it on the observations the agent has reached. The
squared prediction error is small on familiar observations and large on new ones, and that
error of ``s'`` is the bonus of the transition ``(s, a, s')``.
"""
from __future__ import annotations

from typing import Any

import torch
from gymnasium import spaces
from torch import nn

from rlpipe.model.encoders import ObsShape
from rlpipe.reward_model.intrinsic import IntrinsicRewardModel, Transitions, observation_network


class RndRewardModel(IntrinsicRewardModel):
    """RND bonus: ``||predictor(s') - target(s')||^2`` (mean over the feature dims), running-std scaled.

    ``cfg`` reads ``intrinsic_reward_weight``, ``learning_rate``, ``obs_norm``, the encoder's
    settings (``encoder``, ``encoder_kwargs``, ``encoder_hidden_size_list``; the first two may be
    absent) and ``feature_size``. Both networks are built from torch's
    global generator (seed it first, as ``build_parts`` does); the target never trains.
    """

    def __init__(self, cfg: Any, obs_shape: ObsShape | spaces.Space[Any]) -> None:
        super().__init__(cfg, obs_shape)
        feature_size = int(cfg.feature_size)
        self.target = observation_network(self._obs_space, cfg, feature_size).requires_grad_(False)
        self.predictor = observation_network(self._obs_space, cfg, feature_size)
        self._make_optimizer()

    def networks(self) -> dict[str, nn.Module]:
        return {"target": self.target, "predictor": self.predictor}

    def _error(self, next_obs: torch.Tensor) -> torch.Tensor:
        return (self.predictor(next_obs) - self.target(next_obs)).square().mean(dim=-1)

    def bonus(self, batch: Transitions) -> torch.Tensor:
        return self._error(batch.next_obs)

    def loss(self, batch: Transitions) -> tuple[torch.Tensor, torch.Tensor]:
        error = self._error(batch.next_obs)
        return error.mean(), error.detach()
