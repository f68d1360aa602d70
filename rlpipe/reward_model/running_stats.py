"""Running mean and variance over every value seen so far, merged batch by batch.

Intrinsic rewards and observations are normalised with these statistics, not with the
statistics of the batch at hand: per-batch normalisation (what DI-engine's RND does) makes
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

    def update(self, rows: torch.Tensor) -> None:
        """Fold ``rows`` ``[N, *shape]`` into the statistics."""
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
        """``(values - mean) / std`` in ``values``' dtype, optionally clipped to ``[-clip, clip]``."""
        out = (values - self.mean.to(values.dtype)) / self.std.to(values.dtype)
        return out if clip is None else out.clamp(-clip, clip)

    def state_dict(self) -> dict[str, Any]:
        return {"mean": self.mean.clone(), "var": self.var.clone(), "count": self.count}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.mean = state["mean"].to(torch.float64).clone()
        self.var = state["var"].to(torch.float64).clone()
        self.count = int(state["count"])
