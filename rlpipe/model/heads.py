"""The Q head of every discrete algorithm: an encoder, then ``N`` numbers per action (C51's logits
over atoms, QR-DQN's quantiles, DQN's one value), with an optional dueling split and optional
noisy layers."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from gymnasium import spaces
from torch import nn

from rlpipe.model.encoders import EncoderConfig, ObsShape, check_sizes, make_encoder, observation_space
from rlpipe.model.noisy import NoisyLinear, make_linears_noisy


def _linear(in_features: int, out_features: int, noisy: bool, sigma0: float) -> nn.Module:
    return NoisyLinear(in_features, out_features, sigma0) if noisy else nn.Linear(in_features, out_features)


class DistributionalQ(nn.Module):
    """Maps observations ``[B, *obs_shape]`` to ``[B, A, N]``: ``N`` outputs per action.

    The encoder comes from the observation space (:func:`~rlpipe.model.encoders.make_encoder`).
    With ``dueling`` a value stream ``v`` ``[B, 1, N]`` and an advantage stream ``adv``
    ``[B, A, N]`` combine per output as ``v + adv - mean_a(adv)`` (Rainbow's dueling head for
    distributions, on the logits for C51). With ``noisy`` the head's layers are
    :class:`~rlpipe.model.noisy.NoisyLinear` with ``sigma0``; with ``noisy_encoder`` too the
    encoder's fully connected layers are (the Nature CNN's 512-unit layer, as in Rainbow and DER),
    else the encoder stays deterministic. With one output it is DQN's Q-network
    (:class:`~rlpipe.model.q_network.DQN`).
    """

    def __init__(
        self,
        obs_shape: ObsShape | spaces.Space[Any],
        action_shape: int,
        n_outputs: int,
        encoder_hidden_size_list: Sequence[int] = (64, 64),
        dueling: bool = False,
        encoder: str = "auto",
        noisy: bool = False,
        sigma0: float = 0.5,
        noisy_encoder: bool = False,
        encoder_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()
        check_sizes(obs_shape, action_shape)
        if noisy_encoder and not noisy:
            raise ValueError("a noisy encoder (noisy_encoder) needs noisy layers (noisy=True)")
        if n_outputs < 1:
            raise ValueError(f"a distributional head needs at least one output per action, got {n_outputs}")
        self.action_shape = int(action_shape)
        self.n_outputs = int(n_outputs)
        self.dueling = dueling
        self.encoder, n_features = make_encoder(
            observation_space(obs_shape),
            EncoderConfig(encoder_hidden_size_list, encoder, encoder_kwargs=encoder_kwargs or {}),
        )
        if noisy_encoder:
            make_linears_noisy(self.encoder, sigma0)
        if dueling:
            self.value_head = _linear(n_features, self.n_outputs, noisy, sigma0)
            self.advantage_head = _linear(n_features, self.action_shape * self.n_outputs, noisy, sigma0)
        else:
            self.head = _linear(n_features, self.action_shape * self.n_outputs, noisy, sigma0)

    def forward(self, obs: Any) -> torch.Tensor:
        """``obs`` ``[B, *obs_shape]`` in any dtype (a dict of them for a ``Dict`` space) -> ``[B, A, N]``."""
        h = self.encoder(obs)
        shape = (h.shape[0], self.action_shape, self.n_outputs)
        # .float(): under bfloat16 autocast (learn.precision) the outputs leave in float32, so that
        # targets, losses and TD errors keep their digits; a no-op in float32.
        if not self.dueling:
            return self.head(h).float().view(shape)
        v = self.value_head(h).float().unsqueeze(1)
        adv = self.advantage_head(h).float().view(shape)
        return v + adv - adv.mean(dim=1, keepdim=True)
