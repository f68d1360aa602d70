"""Factorised Gaussian noisy linear layers (Fortunato et al., 2018, "Noisy Networks for Exploration").

A :class:`NoisyLinear` computes ``y = (mu_w + sigma_w * eps_w) x + mu_b + sigma_b * eps_b``
with learned ``mu`` and ``sigma`` and factorised noise: ``eps_w = f(eps_out) f(eps_in)^T`` and
``eps_b = f(eps_out)``, ``f(x) = sign(x) sqrt(|x|)``, from ``p + q`` standard normal draws
instead of ``p * q``. The noise is held until :meth:`NoisyLinear.reset_noise` draws the next
one, so the caller decides when it changes (per update and per collect step, as in the paper).
In eval mode (``module.eval()``) the layer is the plain linear layer of its means.
"""
from __future__ import annotations

import math

import torch
from torch import nn

FACTORED_MAX_ROWS = 64
"""Batches below this many rows take :class:`NoisyLinear`'s factored path, which multiplies the input
twice but never builds the noisy weight matrix. ``benchmarks/numerics.py`` measures both paths on the
Nature CNN's noisy 3136x512 layer: the factored one is much faster for acting (one row) and for DER's
32-row updates, the weight matrix faster at 256 rows."""


def _scaled(x: torch.Tensor) -> torch.Tensor:
    """``f(x) = sign(x) * sqrt(|x|)``, the paper's scaling of factorised noise."""
    return x.sign() * x.abs().sqrt()


class NoisyLinear(nn.Module):
    """A linear layer ``in_features -> out_features`` with factorised Gaussian parameter noise.

    Initialised as in the paper: ``mu ~ U(-1/sqrt(p), 1/sqrt(p))`` and ``sigma = sigma0 / sqrt(p)``
    with ``p = in_features``. The noise buffers are not part of the state dict: a copy of the
    layer (a target network, a remote collector) draws its own.
    """

    eps_in: torch.Tensor
    """``f(eps_in)`` ``[in_features]``, the input side of the factorised noise."""
    eps_out: torch.Tensor
    """``f(eps_out)`` ``[out_features]``, the output side (and the bias noise)."""

    def __init__(self, in_features: int, out_features: int, sigma0: float = 0.5) -> None:
        super().__init__()
        if sigma0 < 0:
            raise ValueError(f"noisy_sigma0 must be >= 0, got {sigma0}")
        self.in_features = in_features
        self.out_features = out_features
        bound = 1.0 / math.sqrt(in_features)
        self.weight_mu = nn.Parameter(torch.empty(out_features, in_features).uniform_(-bound, bound))
        self.bias_mu = nn.Parameter(torch.empty(out_features).uniform_(-bound, bound))
        self.weight_sigma = nn.Parameter(torch.full((out_features, in_features), sigma0 * bound))
        self.bias_sigma = nn.Parameter(torch.full((out_features,), sigma0 * bound))
        self.register_buffer("eps_in", torch.zeros(in_features), persistent=False)
        self.register_buffer("eps_out", torch.zeros(out_features), persistent=False)

    def reset_noise(self, generator: torch.Generator | None = None) -> None:
        """Draw new factorised noise (``in_features + out_features`` normals) from ``generator``."""
        device = self.eps_in.device
        gen_device = generator.device if generator is not None else device
        eps_in = torch.randn(self.in_features, generator=generator, device=gen_device)
        eps_out = torch.randn(self.out_features, generator=generator, device=gen_device)
        self.eps_in.copy_(_scaled(eps_in).to(device))
        self.eps_out.copy_(_scaled(eps_out).to(device))

    def noise(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The current ``(eps_w [out, in], eps_b [out])``."""
        return torch.outer(self.eps_out, self.eps_in), self.eps_out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` ``[..., in_features]`` -> ``[..., out_features]``; without noise in eval mode.

        A batch of fewer than :data:`FACTORED_MAX_ROWS` rows never forms the noisy weight matrix:
        ``(sigma_w * eps_out eps_in^T) x = eps_out * (sigma_w (eps_in * x))``, two products with
        ``x`` instead of three passes over a weight-sized matrix (and more in the backward pass).
        Under bfloat16 autocast its output is float32 (the float32 ``eps_out`` scales the noise
        term), the weight-matrix path's bfloat16; the next product casts either to bfloat16.
        """
        if not self.training:
            return nn.functional.linear(x, self.weight_mu, self.bias_mu)
        bias = self.bias_mu + self.bias_sigma * self.eps_out
        if x.numel() < FACTORED_MAX_ROWS * self.in_features:
            noise = nn.functional.linear(x * self.eps_in, self.weight_sigma) * self.eps_out
            return nn.functional.linear(x, self.weight_mu, bias) + noise
        eps_w, _ = self.noise()
        return nn.functional.linear(x, self.weight_mu + self.weight_sigma * eps_w, bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}"


def reset_noise(module: nn.Module, generator: torch.Generator | None = None) -> None:
    """Draw new noise in every :class:`NoisyLinear` of ``module``, in module order."""
    for layer in module.modules():
        if isinstance(layer, NoisyLinear):
            layer.reset_noise(generator)


def has_noise(module: nn.Module) -> bool:
    """Whether ``module`` holds any :class:`NoisyLinear`."""
    return any(isinstance(layer, NoisyLinear) for layer in module.modules())


def make_linears_noisy(module: nn.Module, sigma0: float) -> None:
    """Replace every ``nn.Linear`` inside ``module`` by a freshly initialised :class:`NoisyLinear` of
    the same shape. Rainbow and DER make every fully connected layer after the convolutions noisy,
    the encoder's included (``policy.model.noisy_encoder``)."""
    for name, child in module.named_children():
        if isinstance(child, nn.Linear):
            setattr(module, name, NoisyLinear(child.in_features, child.out_features, sigma0))
        else:
            make_linears_noisy(child, sigma0)
