"""Q-networks for discrete actions: an encoder with a linear or dueling head."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from gymnasium import spaces
from torch import nn

from rlpipe.model.encoders import EncoderConfig, ObsShape, check_sizes, make_encoder, observation_space


class DQN(nn.Module):
    """Maps observations ``[B, *obs_shape]`` to action values ``q`` ``[B, action_shape]``.

    ``obs_shape`` is a shape or an observation space; the encoder is chosen from it
    (:func:`~rlpipe.model.encoders.make_encoder`: for vectors ``Linear -> ReLU`` per entry of
    ``encoder_hidden_size_list``). With ``dueling`` the head splits into a state value ``v`` and
    advantages ``adv``, combined as ``q = v + adv - mean(adv)`` (Wang et al., 2016) so that
    ``v`` and ``adv`` are identifiable.
    """

    def __init__(
        self,
        obs_shape: ObsShape | spaces.Space[Any],
        action_shape: int,
        encoder_hidden_size_list: Sequence[int] = (64, 64),
        dueling: bool = False,
        encoder: str = "auto",
    ) -> None:
        super().__init__()
        check_sizes(obs_shape, action_shape)
        self.action_shape = int(action_shape)
        self.dueling = dueling
        self.encoder, n_features = make_encoder(
            observation_space(obs_shape), EncoderConfig(encoder_hidden_size_list, encoder)
        )
        if dueling:
            self.value_head = nn.Linear(n_features, 1)
            self.advantage_head = nn.Linear(n_features, self.action_shape)
        else:
            self.head = nn.Linear(n_features, self.action_shape)

    def forward(self, obs: Any) -> torch.Tensor:
        """``obs`` ``[B, *obs_shape]`` in any dtype (a dict of them for a ``Dict`` space) -> ``q`` ``[B, A]``."""
        h = self.encoder(obs)
        # .float(): under bfloat16 autocast (learn.precision) the values leave in float32, so that
        # targets and TD errors keep their digits; a no-op in float32.
        if not self.dueling:
            return self.head(h).float()
        v = self.value_head(h).float()
        adv = self.advantage_head(h).float()
        return v + adv - adv.mean(dim=-1, keepdim=True)
