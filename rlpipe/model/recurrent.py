"""The recurrent Q-network of R2D2 and DRQN: an encoder chosen from the observation space, a GRU or
LSTM core, then DQN's Q head (linear or dueling) on the core's output.

The recurrent state of each env is ONE float32 vector, so that replay buffers and acting memories
hold one array: a GRU's ``h`` (``S = H``), an LSTM's ``h`` and ``c`` concatenated (``S = 2H``).

``forward`` unrolls a sequence ``[B, T, ...]`` in one call of torch's fused recurrent kernel and
returns the state after every step, which R2D2 needs to evaluate each row's next observation.
torch's LSTM returns ``h`` at every step but ``c`` only at the last, so the cells along the
sequence are recomputed from the inputs and the returned ``h`` (:func:`lstm_cells`): one batched
matrix product and a loop of two elementwise operations per step.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from gymnasium import spaces
from torch import nn

from rlpipe.model.encoders import EncoderConfig, ObsShape, check_sizes, make_encoder, observation_space
from rlpipe.model.q_network import DQN

CORES = ("gru", "lstm")
"""Values of ``policy.model.core``."""
DEFAULT_CORE = "lstm"
"""R2D2's core (Kapturowski et al., 2019) when ``policy.model.core`` is absent."""
DEFAULT_CORE_HIDDEN = 128
"""Units of the core when ``policy.model.core_hidden`` is absent."""

Obs = Any
"""Observations: a tensor, or a dict of them for a ``Dict`` space."""


def map_obs(obs: Obs, fn: Callable[[torch.Tensor], torch.Tensor]) -> Obs:
    """``fn`` applied to an observation tensor, or to each entry of a dict of them."""
    if isinstance(obs, dict):
        return {key: fn(value) for key, value in obs.items()}
    return fn(obs)


def _leading(obs: Obs) -> torch.Size:
    return next(iter(obs.values())).shape if isinstance(obs, dict) else obs.shape


def lstm_cells(core: nn.LSTM, x: torch.Tensor, h: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor) -> torch.Tensor:
    """The cell states ``c`` ``[B, T, H]`` of a one-layer ``core`` that read ``x`` ``[B, T, F]`` from
    ``(h0, c0)`` (each ``[B, H]``) and returned the hidden states ``h`` ``[B, T, H]``.

    The gates of every step come from its input and the previous ``h`` at once; then
    ``c_t = f_t * c_{t-1} + i_t * g_t`` (torch's gate order ``i, f, g, o``)."""
    w_ih, w_hh, b_ih, b_hh = core.all_weights[0]
    h_prev = torch.cat([h0.unsqueeze(1), h[:, :-1]], dim=1)
    gates = nn.functional.linear(x, w_ih, b_ih) + nn.functional.linear(h_prev, w_hh, b_hh)
    i, f, g, _ = gates.float().chunk(4, dim=-1)
    inflow, forget = torch.sigmoid(i) * torch.tanh(g), torch.sigmoid(f)
    c, cells = c0, []
    for t in range(x.shape[1]):
        c = forget[:, t] * c + inflow[:, t]
        cells.append(c)
    return torch.stack(cells, dim=1)


class RecurrentQ(nn.Module):
    """Maps observation sequences ``[B, T, *obs_shape]`` and start states ``[B, S]`` to action values
    ``q`` ``[B, T, A]`` and the states after each step ``[B, T, S]``.

    The encoder comes from ``observation_space`` (:func:`~rlpipe.model.encoders.make_encoder` with
    ``encoder_cfg``, ``policy.model`` or an :class:`~rlpipe.model.encoders.EncoderConfig`), so every
    observation rlpipe reads works (vectors, one-hot discrete, images, dicts). The core is a
    one-layer ``nn.GRU`` or ``nn.LSTM`` of ``core_hidden`` units; the head is
    :class:`~rlpipe.model.q_network.DQN` on the core's output (no hidden layers: linear, or
    ``dueling``'s ``v + adv - mean(adv)``). Parameters: ``encoder.*``, ``core.*``, ``head.*``.
    """

    def __init__(
        self,
        obs_shape: ObsShape | spaces.Space[Any],
        action_shape: int,
        encoder_cfg: Any = None,
        core: str = DEFAULT_CORE,
        core_hidden: int = DEFAULT_CORE_HIDDEN,
        dueling: bool = False,
    ) -> None:
        super().__init__()
        check_sizes(obs_shape, action_shape)
        if core not in CORES:
            raise ValueError(f"policy.model.core must be one of {', '.join(CORES)}, got {core!r}")
        if core_hidden < 1:
            raise ValueError(f"policy.model.core_hidden must be positive, got {core_hidden}")
        self.encoder, n_features = make_encoder(observation_space(obs_shape),
                                                encoder_cfg if encoder_cfg is not None else EncoderConfig())
        self.core_kind = core
        self.hidden_size = int(core_hidden)
        self.state_size = self.hidden_size * (2 if core == "lstm" else 1)
        """``S``, the width of one env's state."""
        self.core: nn.GRU | nn.LSTM = (nn.LSTM if core == "lstm" else nn.GRU)(
            n_features, self.hidden_size, batch_first=True)
        self.head = DQN(self.hidden_size, action_shape, encoder_hidden_size_list=(), dueling=dueling)

    @classmethod
    def from_config(cls, obs_shape: ObsShape | spaces.Space[Any], action_shape: int, model_cfg: Any) -> RecurrentQ:
        """The network ``policy.model`` describes: ``core`` (absent: :data:`DEFAULT_CORE`), ``core_hidden``
        (absent: :data:`DEFAULT_CORE_HIDDEN`), ``dueling`` (absent: off) and what the encoder reads."""
        return cls(obs_shape, action_shape, model_cfg,
                   core=str(getattr(model_cfg, "core", DEFAULT_CORE)),
                   core_hidden=int(getattr(model_cfg, "core_hidden", DEFAULT_CORE_HIDDEN)),
                   dueling=bool(getattr(model_cfg, "dueling", False)))

    def initial_state(self, batch: int) -> torch.Tensor:
        """Zero states ``[batch, S]``, float32, on the module's device."""
        return torch.zeros(batch, self.state_size, device=next(self.parameters()).device)

    def forward(self, obs: Obs, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``obs`` ``[B, T, *obs_shape]`` (any dtype; a dict of them for a ``Dict`` space) from ``state``
        ``[B, S]`` -> ``q`` ``[B, T, A]`` and ``states`` ``[B, T, S]``, float32, where ``states[:, t]``
        is the state after step ``t`` (``states[:, -1]`` continues the sequence)."""
        batch, steps = _leading(obs)[:2]
        if tuple(state.shape) != (batch, self.state_size):
            raise ValueError(f"recurrent state must be [{batch}, {self.state_size}] for {batch} sequences, "
                             f"got shape {tuple(state.shape)}")
        x = self.encoder(map_obs(obs, lambda o: o.flatten(0, 1))).view(batch, steps, -1)
        if isinstance(self.core, nn.LSTM):
            h0, c0 = state.split(self.hidden_size, dim=1)
            h, _ = self.core(x, (h0.unsqueeze(0).contiguous(), c0.unsqueeze(0).contiguous()))
            states = torch.cat([h.float(), lstm_cells(self.core, x, h, h0, c0)], dim=2)
        else:
            h, _ = self.core(x, state.unsqueeze(0).contiguous())
            states = h.float()
        q = self.head(h.reshape(batch * steps, self.hidden_size)).view(batch, steps, -1)
        return q, states

    def step(self, obs: Obs, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One step for ``N`` envs: ``obs`` ``[N, *obs_shape]`` from ``state`` ``[N, S]`` -> ``q`` ``[N, A]``
        and the new state ``[N, S]`` (:meth:`forward` with ``T = 1``)."""
        q, states = self(map_obs(obs, lambda o: o.unsqueeze(1)), state)
        return q[:, 0], states[:, 0]
