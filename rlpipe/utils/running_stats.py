"""Running mean and variance over every value seen so far, merged batch by batch.

Intrinsic rewards and observations (of reward models, and of actor-critic policies with
``policy.model.obs_norm``) are normalised with these statistics, not with the statistics of
the batch at hand: per-batch normalisation (what DI-engine's RND does) makes
a sample's bonus depend on which other samples were drawn with it, and turns a batch of
equally novel states into a batch of bonuses spread over [0, 1].
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch


class RunningMeanStd:
    """Mean and variance per feature (``shape``) of all rows passed to :meth:`update`.

    Batches are merged with the parallel-variance formula (Chan et al.), in float64, so the
    result does not depend on how the rows were split into batches.
    """

    def __init__(self, shape: Sequence[int] = (), eps: float = 1e-8) -> None:
        self.mean = torch.zeros(tuple(shape), dtype=torch.float64)
        self.var = torch.ones(tuple(shape), dtype=torch.float64)
        self.count = 0
        self._eps = eps
        self._cast_key: tuple[torch.dtype, torch.device] | None = None
        self._cast_cache: tuple[torch.Tensor, torch.Tensor] = (self.mean, self.std)

    def update(self, rows: torch.Tensor) -> None:
        """Fold ``rows`` ``[N, *shape]`` into the statistics."""
        self._cast_key = None
        rows = rows.detach().to(torch.float64).reshape(-1, *self.mean.shape)
        n = rows.shape[0]
        if n == 0:
            return
        batch_mean, batch_var = rows.mean(dim=0), rows.var(dim=0, unbiased=False)
        if self.count == 0:
            self.mean, self.var, self.count = batch_mean, batch_var, n
            return
        total = self.count + n
        delta = batch_mean - self.mean
        self.mean = self.mean + delta * (n / total)
        self.var = (self.var * self.count + batch_var * n + delta.square() * (self.count * n / total)) / total
        self.count = total

    @property
    def std(self) -> torch.Tensor:
        """``sqrt(var + eps)``, float64."""
        return (self.var + self._eps).sqrt()

    def normalize(self, values: torch.Tensor, clip: float | None = None) -> torch.Tensor:
        """``(values - mean) / std`` in ``values``' dtype and device, optionally clipped to ``[-clip, clip]``."""
        mean, std = self._cast(values)
        out = (values - mean) / std
        return out if clip is None else out.clamp(-clip, clip)

    def _cast(self, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and std in ``like``'s dtype and device, converted once per update (normalising a
        batch of small observations costs about as much as the two conversions)."""
        key = (like.dtype, like.device)
        if self._cast_key != key:
            self._cast_cache = (self.mean.to(like), self.std.to(like))
            self._cast_key = key
        return self._cast_cache

    def state_dict(self) -> dict[str, Any]:
        return {"mean": self.mean.clone(), "var": self.var.clone(), "count": self.count}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self._cast_key = None
        self.mean = state["mean"].to(torch.float64).clone()
        self.var = state["var"].to(torch.float64).clone()
        self.count = int(state["count"])
