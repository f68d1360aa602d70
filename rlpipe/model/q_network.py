"""The Q-network for discrete actions: the distributional head with one output per action."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from gymnasium import spaces

from rlpipe.model.encoders import ObsShape
from rlpipe.model.heads import DistributionalQ


class DQN(DistributionalQ):
    """Maps observations ``[B, *obs_shape]`` to action values ``q`` ``[B, action_shape]``.

    :class:`~rlpipe.model.heads.DistributionalQ` with one output per action, so the encoder
    (chosen from ``obs_shape``, a shape or an observation space; for vectors ``Linear -> ReLU``
    per entry of ``encoder_hidden_size_list``), the linear or dueling head and its parameter
    names (``encoder.*``, ``head.*`` or ``value_head.*`` and ``advantage_head.*``) are that
    network's. With ``dueling`` the head splits into a state value ``v`` and advantages ``adv``,
    combined as ``q = v + adv - mean(adv)`` (Wang et al., 2016) so that ``v`` and ``adv`` are
    identifiable.
    """

    def __init__(
        self,
        obs_shape: ObsShape | spaces.Space[Any],
        action_shape: int,
        encoder_hidden_size_list: Sequence[int] = (64, 64),
        dueling: bool = False,
        encoder: str = "auto",
        encoder_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(obs_shape, action_shape, 1, encoder_hidden_size_list, dueling, encoder,
                         encoder_kwargs=encoder_kwargs)

    def forward(self, obs: Any) -> torch.Tensor:
        """``obs`` ``[B, *obs_shape]`` in any dtype (a dict of them for a ``Dict`` space) -> ``q`` ``[B, A]``."""
        return super().forward(obs).squeeze(-1)
