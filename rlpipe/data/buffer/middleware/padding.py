"""padding: fill every sampled group (``sample(groupby=...)``) up to the largest group's size."""

from __future__ import annotations

from typing import Any

import numpy as np

from rlpipe.data.buffer.base import BufferedData, BufferMiddleware, Chain

POLICIES = ("random", "none")


class Padding(BufferMiddleware):
    """``policy="random"`` pads with random items of the same group; ``"none"`` with empty
    ``BufferedData(data=None, index=-1, meta={})`` placeholders."""

    def __init__(self, policy: str, seed: int | None) -> None:
        if policy not in POLICIES:
            raise ValueError(f"padding policy must be one of {POLICIES}, got {policy!r}")
        self.policy = policy
        self.rng = np.random.default_rng(seed)

    def _pad(self, group: list[Any], length: int) -> list[Any]:
        missing = length - len(group)
        if missing <= 0:
            return group
        if self.policy == "none":
            return group + [BufferedData(None, -1, {}) for _ in range(missing)]
        return group + [group[i] for i in self.rng.integers(0, len(group), missing).tolist()]

    def sample(self, chain: Chain, **kwargs: Any) -> list[Any]:
        if kwargs.get("groupby") is None:
            raise ValueError("padding needs sample(..., groupby=<meta key>)")
        groups = chain(**kwargs)
        length = max((len(group) for group in groups), default=0)
        return [self._pad(group, length) for group in groups]


def padding(policy: str = "random", seed: int | None = None) -> Padding:
    """Middleware that pads sampled groups to equal length."""
    return Padding(policy, seed)
