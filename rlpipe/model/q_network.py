"""Q-networks for discrete actions: an MLP encoder with a linear or dueling head."""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn


class DQN(nn.Module):
    """Maps observations ``[B, obs_shape]`` to action values ``q`` ``[B, action_shape]``.

    The encoder is ``Linear -> ReLU`` per entry of ``encoder_hidden_size_list``. With
    ``dueling`` the head splits into a state value ``v`` and advantages ``adv``, combined as
    ``q = v + adv - mean(adv)`` (Wang et al., 2016) so that ``v`` and ``adv`` are identifiable.
    """

    def __init__(
        self,
        obs_shape: int,
        action_shape: int,
        encoder_hidden_size_list: Sequence[int] = (64, 64),
        dueling: bool = False,
    ) -> None:
        super().__init__()
        if obs_shape <= 0 or action_shape <= 0:
            raise ValueError(
                f"obs_shape and action_shape must be positive, got {obs_shape} and {action_shape}"
            )
        self.obs_shape = int(obs_shape)
        self.action_shape = int(action_shape)
        self.dueling = dueling
        layers: list[nn.Module] = []
        in_size = self.obs_shape
        for size in encoder_hidden_size_list:
            layers += [nn.Linear(in_size, size), nn.ReLU()]
            in_size = size
        self.encoder = nn.Sequential(*layers)
        if dueling:
            self.value_head = nn.Linear(in_size, 1)
            self.advantage_head = nn.Linear(in_size, self.action_shape)
        else:
            self.head = nn.Linear(in_size, self.action_shape)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """``obs`` ``[B, obs_shape]`` float -> ``q`` ``[B, action_shape]``."""
        if obs.shape[-1] != self.obs_shape:
            raise ValueError(
                f"model expects observations of size {self.obs_shape}, got shape {tuple(obs.shape)}"
            )
        h = obs
        for layer in self.encoder:  # inline Sequential.forward: one module call less per batch
            h = layer(h)
        if not self.dueling:
            return self.head(h)
        v = self.value_head(h)
        adv = self.advantage_head(h)
        return v + adv - adv.mean(dim=-1, keepdim=True)
