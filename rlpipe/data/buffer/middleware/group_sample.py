"""group_sample: trim each sampled group (``sample(groupby=...)``) to ``size_in_group`` items."""

from __future__ import annotations

from typing import Any

import numpy as np

from rlpipe.data.buffer.base import BufferMiddleware, Chain


class GroupSample(BufferMiddleware):
    """Picks ``size_in_group`` items of every sampled group.

    ``ordered_in_group``: a window of consecutive items at a random start (the whole group
    when it is shorter). Otherwise a random draw: with ``max_use_in_group`` as few repeats as
    possible (every item once before any repeats), else independently with replacement.
    """

    def __init__(
        self, size_in_group: int, ordered_in_group: bool, max_use_in_group: bool, seed: int | None
    ) -> None:
        if size_in_group < 1:
            raise ValueError(f"size_in_group must be >= 1, got {size_in_group}")
        self.size_in_group = int(size_in_group)
        self.ordered_in_group = ordered_in_group
        self.max_use_in_group = max_use_in_group
        self.rng = np.random.default_rng(seed)

    def _pick(self, group: list[Any]) -> list[Any]:
        n, k = len(group), self.size_in_group
        if self.ordered_in_group:
            start = int(self.rng.integers(0, max(n - k, 0) + 1))
            return group[start : start + k]
        if self.max_use_in_group:
            picks = np.concatenate([self.rng.permutation(n) for _ in range(-(-k // n))])[:k]
        else:
            picks = self.rng.integers(0, n, k)
        return [group[i] for i in picks.tolist()]

    def sample(self, chain: Chain, **kwargs: Any) -> list[Any]:
        if kwargs.get("groupby") is None:
            raise ValueError("group_sample needs sample(..., groupby=<meta key>)")
        return [self._pick(group) for group in chain(**kwargs)]


def group_sample(
    size_in_group: int, ordered_in_group: bool = True, max_use_in_group: bool = True, seed: int | None = None
) -> GroupSample:
    """Middleware that trims each sampled group to ``size_in_group`` items."""
    return GroupSample(size_in_group, ordered_in_group, max_use_in_group, seed)
