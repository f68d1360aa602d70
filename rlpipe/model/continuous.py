"""Networks for continuous actions in ``[-1, 1]``: an ensemble of Q critics and two actors.

``EnsembleQ`` evaluates all critics (SAC's and TD3's twins) in one batched pass: each layer
holds the weights of every member stacked as ``[n, in, out]`` and runs one ``bmm`` instead
of ``n`` separate ``addmm`` calls. That halves the operator calls and autograd
nodes of a twin-critic update; the arithmetic is the same (at batch 256 on one CPU thread
the critics' forward and backward run about 10% faster than two ``nn.Sequential`` stacks).
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import pairwise
from typing import Any

import torch
from gymnasium import spaces
from torch import nn

from rlpipe.model.batch_renorm import BatchRenorm
from rlpipe.model.encoders import EncoderConfig, ObsShape, check_sizes, make_encoder, observation_space

LOG_STD_MIN = -20.0
LOG_STD_MAX = 2.0
_LOG_2 = math.log(2.0)
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


class EnsembleLinear(nn.Module):
    """``n`` independent linear layers applied in one batched matrix product.

    ``weight`` is ``[n, in, out]`` (member ``i`` computes ``x @ weight[i] + bias[i]``) and
    ``bias`` ``[n, 1, out]``. Each member is initialised as ``nn.Linear(in, out)`` would be.
    """

    def __init__(self, in_features: int, out_features: int, n: int) -> None:
        super().__init__()
        self.in_features, self.out_features, self.n = in_features, out_features, n
        self.weight = nn.Parameter(torch.empty(n, in_features, out_features))
        self.bias = nn.Parameter(torch.empty(n, 1, out_features))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.in_features)
        with torch.no_grad():
            for i in range(self.n):
                # weight[i].T has nn.Linear's [out, in] layout, so fan_in is computed as there.
                nn.init.kaiming_uniform_(self.weight[i].T, a=math.sqrt(5))
                self.bias[i].uniform_(-bound, bound)

    def forward(self, x: torch.Tensor, members: int | None = None) -> torch.Tensor:
        """``x`` ``[n, B, in]`` (or ``[B, in]``, shared by all members) -> ``[n, B, out]``.

        With ``members`` only the first ``members`` layers are applied (``x`` must match).
        """
        weight, bias = (self.weight, self.bias) if members is None else (self.weight[:members], self.bias[:members])
        if x.dim() == 2:
            x = x.expand(weight.shape[0], *x.shape)  # a view: every member reads the same rows
        # Under bfloat16 autocast (learn.precision) ``x`` arrives in bfloat16: the small weights
        # below are cast to it, since a float32 operand would make each op convert the whole
        # [n, B, hidden] activation to float32 and back (3.5-7% of a bf16 SAC update).
        if self.out_features == 1 and x.dtype != torch.float32:
            # A bfloat16 product would round each Q-value to bfloat16: the one-output layer is a
            # multiply-and-sum accumulated in float32 instead, so Q-values keep full precision. In
            # float32 the batched product is the faster of the two on torch 2.13's CPU kernels.
            products = x * weight.transpose(1, 2).to(x.dtype)
            return products.sum(dim=-1, keepdim=True, dtype=torch.float32) + bias
        # bmm then an in-place bias: baddbmm's broadcast copy of the bias into its output
        # costs about 20% more at 256 x 256 on one CPU thread.
        out = torch.bmm(x, weight)
        return out.add_(bias.to(out.dtype))

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, n={self.n}"


class EnsembleLayerNorm(nn.Module):
    """Layer normalisation of ``[n, B, features]`` with a gain and bias per member."""

    def __init__(self, features: int, n: int) -> None:
        super().__init__()
        self.features = features
        self.weight = nn.Parameter(torch.ones(n, 1, features))
        self.bias = nn.Parameter(torch.zeros(n, 1, features))

    def forward(self, x: torch.Tensor, members: int | None = None) -> torch.Tensor:
        """``x`` ``[n, B, features]`` normalised, with the first ``members`` gains and biases (all: None)."""
        weight, bias = (self.weight, self.bias) if members is None else (self.weight[:members], self.bias[:members])
        h = nn.functional.layer_norm(x, (self.features,))
        return h * weight.to(h.dtype) + bias.to(h.dtype)


class EnsembleQ(nn.Module):
    """``n_critics`` Q-functions ``Q_i(s, a)``, each an MLP on ``concat(encoder(obs), action)``.

    ``forward(obs [B, *obs_shape], action [B, action_shape])`` returns ``q`` ``[n_critics, B]``;
    the encoder has no hidden layers of its own (for vectors: the observation as float32);
    the members share no weights, only the batched matrix products that evaluate them. With
    ``batch_renorm`` (CrossQ) each member renormalises its input and each hidden ReLU's output
    with its own :class:`BatchRenorm` statistics. With ``layer_norm`` (RLPD's critics) each hidden
    layer's output is layer-normalised before its ReLU.
    """

    def __init__(
        self,
        obs_shape: ObsShape | spaces.Space[Any],
        action_shape: int,
        hidden: Sequence[int] = (256, 256),
        n_critics: int = 2,
        batch_renorm: bool = False,
        encoder: str = "auto",
        encoder_kwargs: Mapping[str, Any] | None = None,
        layer_norm: bool = False,
    ) -> None:
        super().__init__()
        check_sizes(obs_shape, action_shape)
        if n_critics <= 0:
            raise ValueError(f"n_critics must be positive, got {n_critics}")
        self.action_shape, self.n_critics = int(action_shape), int(n_critics)
        self.encoder, n_features = make_encoder(observation_space(obs_shape),
                                                EncoderConfig((), encoder, encoder_kwargs=encoder_kwargs or {}))
        sizes = [n_features + self.action_shape, *hidden, 1]
        self.layers = nn.ModuleList(
            EnsembleLinear(i, o, self.n_critics) for i, o in pairwise(sizes)
        )
        # norms[i] renormalises the input of layers[i]
        self.norms = nn.ModuleList(BatchRenorm(i, self.n_critics) for i in sizes[:-1]) if batch_renorm else None
        # layer_norms[i] normalises the output of hidden layer i
        self.layer_norms = nn.ModuleList(
            EnsembleLayerNorm(o, self.n_critics) for o in hidden) if layer_norm else None

    def forward(self, obs: Any, action: torch.Tensor, members: int | None = None) -> torch.Tensor:
        """``q`` ``[n, B]`` of the first ``members`` critics (all when None; always all with
        ``batch_renorm``, whose statistics are kept per member)."""
        if members is not None and self.norms is not None:
            raise ValueError("EnsembleQ with batch_renorm evaluates all its members (members must be None)")
        h = torch.cat([self.encoder(obs), action], dim=-1)
        last = len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            if self.norms is not None:
                h = self.norms[i](h.expand(self.n_critics, *h.shape) if h.dim() == 2 else h)
            h = layer(h, members)
            if i < last:
                if self.layer_norms is not None:
                    h = self.layer_norms[i](h, members)
                h = h.relu_()  # in place: baddbmm's backward does not need its output
        return h.squeeze(-1)


class StateValue(nn.Module):
    """A state-value network ``V(s)``: an encoder and MLP to one number (IQL's value function)."""

    def __init__(
        self,
        obs_shape: ObsShape | spaces.Space[Any],
        hidden: Sequence[int] = (256, 256),
        encoder: str = "auto",
        encoder_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.trunk, last = make_encoder(observation_space(obs_shape),
                                        EncoderConfig(hidden, encoder, encoder_kwargs=encoder_kwargs or {}))
        self.head = nn.Linear(last, 1)

    def forward(self, obs: Any) -> torch.Tensor:
        """``obs`` ``[B, *obs_shape]`` -> ``V(s)`` ``[B]``."""
        return self.head(self.trunk(obs)).squeeze(-1)


class Actor(nn.Module):
    """What every continuous policy network offers the policy, evaluation and export:
    ``action_shape`` and ``deterministic(obs)``, the action it takes without exploring,
    ``[B, action_shape]`` in ``[-1, 1]``. It builds the encoder (``trunk``, ``features`` wide)
    its subclass puts its heads on."""

    def __init__(
        self,
        obs_shape: ObsShape | spaces.Space[Any],
        action_shape: int,
        hidden: Sequence[int],
        encoder: str = "auto",
        encoder_kwargs: Mapping[str, Any] | None = None,
        batch_renorm: bool = False,
    ) -> None:
        super().__init__()
        check_sizes(obs_shape, action_shape)
        self.action_shape = int(action_shape)
        self.trunk, self.features = make_encoder(observation_space(obs_shape),
                                                 EncoderConfig(hidden, encoder, batch_renorm, encoder_kwargs or {}))

    def deterministic(self, obs: Any) -> torch.Tensor:
        raise NotImplementedError


class GaussianActor(Actor):
    """IQL's policy: ``N(tanh(MLP(s)), exp(log_std)^2)`` per action dimension, ``log_std`` a learned
    vector that does not depend on the state (clamped to ``[LOG_STD_MIN, LOG_STD_MAX]``); its
    deterministic action is the mean, its samples are clipped to ``[-1, 1]``."""

    def __init__(
        self,
        obs_shape: ObsShape | spaces.Space[Any],
        action_shape: int,
        hidden: Sequence[int] = (256, 256),
        encoder: str = "auto",
        encoder_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(obs_shape, action_shape, hidden, encoder, encoder_kwargs)
        self.head = nn.Linear(self.features, self.action_shape)
        self.log_std = nn.Parameter(torch.zeros(self.action_shape))

    def forward(self, obs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """``mean`` ``[B, action_shape]`` in ``[-1, 1]`` and the clamped ``log_std`` ``[action_shape]``."""
        return torch.tanh(self.head(self.trunk(obs))), self.log_std.clamp(LOG_STD_MIN, LOG_STD_MAX)

    def log_prob(self, obs: Any, action: torch.Tensor) -> torch.Tensor:
        """``log N(action; mean(s), std^2)`` ``[B]``, summed over action dimensions."""
        mean, log_std = self(obs)
        z = (action - mean) * torch.exp(-log_std)
        return (-0.5 * z.square() - log_std - _HALF_LOG_2PI).sum(dim=-1)

    def deterministic(self, obs: Any) -> torch.Tensor:
        """The mean action ``[B, action_shape]``."""
        return self(obs)[0]

    def sample(self, obs: Any, generator: torch.Generator | None = None) -> torch.Tensor:
        """An action drawn from the Gaussian and clipped to ``[-1, 1]``, ``[B, action_shape]``."""
        mean, log_std = self(obs)
        noise = torch.randn(mean.shape, generator=generator, device=mean.device, dtype=mean.dtype)
        return (mean + log_std.exp() * noise).clamp(-1.0, 1.0)


class SquashedGaussianActor(Actor):
    """SAC's policy: ``a = tanh(u)``, ``u ~ N(mean(s), exp(log_std(s))^2)``, per action dimension.

    ``log_std`` is clamped to ``[LOG_STD_MIN, LOG_STD_MAX]`` so that ``std`` neither vanishes
    nor explodes early in training. With ``batch_renorm`` (CrossQ) the trunk renormalises its
    input and each hidden layer's output (see :class:`BatchRenorm`).
    """

    def __init__(
        self,
        obs_shape: ObsShape | spaces.Space[Any],
        action_shape: int,
        hidden: Sequence[int] = (256, 256),
        batch_renorm: bool = False,
        encoder: str = "auto",
        encoder_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(obs_shape, action_shape, hidden, encoder, encoder_kwargs, batch_renorm)
        self.mean_head = nn.Linear(self.features, self.action_shape)
        self.log_std_head = nn.Linear(self.features, self.action_shape)

    def forward(self, obs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """``obs`` ``[B, *obs_shape]`` -> ``mean`` and clamped ``log_std``, each ``[B, action_shape]``."""
        h = self.trunk(obs)
        return self.mean_head(h), self.log_std_head(h).clamp(LOG_STD_MIN, LOG_STD_MAX)

    def sample(
        self, obs: Any, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Reparameterised sample ``a`` ``[B, action_shape]`` and its ``log_pi`` ``[B]``.

        ``a`` is differentiable in the actor's parameters (``u = mean + std * eps``).
        """
        mean, log_std = self(obs)
        eps = torch.randn(mean.shape, generator=generator, device=mean.device, dtype=mean.dtype)
        u = mean + log_std.exp() * eps
        return torch.tanh(u), squashed_gaussian_log_prob(u, eps, log_std)

    def deterministic(self, obs: Any) -> torch.Tensor:
        """The mode of the squashed mean, ``tanh(mean)`` ``[B, action_shape]``."""
        return torch.tanh(self(obs)[0])


def squashed_gaussian_log_prob(u: torch.Tensor, eps: torch.Tensor, log_std: torch.Tensor) -> torch.Tensor:
    """``log pi(tanh(u))`` ``[B]`` of ``u = mean + exp(log_std) * eps``, all three ``[B, A]``.

    The Gaussian term uses ``eps`` directly (``(u - mean) / std == eps``). The change of
    variables subtracts ``log(1 - tanh(u)^2) = 2 * (log 2 - u - softplus(-2u))``, a form
    that stays finite where ``tanh(u)`` rounds to ``+-1``.
    """
    log_gauss = -0.5 * eps.square() - log_std - _HALF_LOG_2PI
    log_det = 2.0 * (_LOG_2 - u - nn.functional.softplus(-2.0 * u))
    return (log_gauss - log_det).sum(dim=-1)


class DeterministicActor(Actor):
    """TD3's and DDPG's policy: ``a = tanh(MLP(s))`` ``[B, action_shape]``."""

    def __init__(
        self,
        obs_shape: ObsShape | spaces.Space[Any],
        action_shape: int,
        hidden: Sequence[int] = (256, 256),
        encoder: str = "auto",
        encoder_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(obs_shape, action_shape, hidden, encoder, encoder_kwargs)
        self.head = nn.Linear(self.features, self.action_shape)

    def forward(self, obs: Any) -> torch.Tensor:
        """``obs`` ``[B, *obs_shape]`` -> ``a`` ``[B, action_shape]`` in ``[-1, 1]``."""
        return torch.tanh(self.head(self.trunk(obs)))

    def deterministic(self, obs: Any) -> torch.Tensor:
        """The action, as every actor's ``deterministic`` gives it (what evaluation and export act with)."""
        return self(obs)
