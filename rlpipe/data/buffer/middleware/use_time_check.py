"""use_time_check: an item is deleted once it has been sampled ``max_use`` times."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rlpipe.data.buffer.base import BufferedData, BufferMiddleware, Chain, SampledBatch, SlotBuffer, flat_items


class UseTimeCheck(BufferMiddleware):
    """Counts samples per item (``meta["use_count"]`` in item results); deletes worn-out items."""

    def __init__(self, buffer: SlotBuffer, max_use: int) -> None:
        if max_use < 1:
            raise ValueError(f"max_use must be >= 1, got {max_use}")
        self.buffer = buffer
        self.max_use = int(max_use)
        self.use_count = np.zeros(buffer.size, dtype=np.int64)

    def _reset(self, ids: np.ndarray) -> None:
        slots, exists, _ = self.buffer.locate(ids)
        self.use_count[slots[exists]] = 0

    def _use(self, ids: np.ndarray) -> np.ndarray:
        """Count one use of each of ``ids``; delete the worn-out ones; return the new counts."""
        slots = self.buffer.locate(ids)[0]
        np.add.at(self.use_count, slots, 1)
        counts = self.use_count[slots]
        worn = ids[counts >= self.max_use]
        if len(worn):
            self.buffer.delete(worn)
        return counts

    def push(self, chain: Chain, data: Any, meta: dict[str, Any] | None) -> BufferedData:
        item = chain(data, meta)
        self._reset(np.array([item.index]))
        return item

    def push_batch(
        self, chain: Chain, batch: Mapping[str, np.ndarray], meta: Mapping[str, np.ndarray] | None
    ) -> np.ndarray:
        ids = chain(batch, meta)
        self._reset(ids)
        return ids

    def sample(self, chain: Chain, **kwargs: Any) -> list[Any]:
        result = chain(**kwargs)
        items = flat_items(result)
        counts = self._use(np.array([item.index for item in items], dtype=np.int64))
        for item, count in zip(items, counts.tolist(), strict=True):
            item.meta["use_count"] = count
        return result

    def sample_batch(self, chain: Chain, **kwargs: Any) -> SampledBatch:
        batch = chain(**kwargs)
        self._use(batch.indices.reshape(-1))
        return batch

    def clear(self, chain: Chain) -> None:
        chain()
        self.use_count[:] = 0

    def state_dict(self) -> dict[str, Any]:
        return {"use_count": self.use_count.copy()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.use_count[:] = state["use_count"]


def use_time_check(buffer_: SlotBuffer, max_use: int = 1) -> UseTimeCheck:
    """Middleware that deletes an item after it has been sampled ``max_use`` times."""
    return UseTimeCheck(buffer_, max_use)
