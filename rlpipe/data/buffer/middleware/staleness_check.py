"""staleness_check: items collected too many train iterations ago are dropped before sampling.

Push with ``meta={"train_iter_data_collected": <train iter>}``; sample with the keyword
``train_iter_sample_data=<train iter now>``. Staleness = now - collected.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rlpipe.data.buffer.base import BufferedData, BufferMiddleware, Chain, SampledBatch, SlotBuffer, flat_items

COLLECTED = "train_iter_data_collected"


class StalenessCheck(BufferMiddleware):
    """Deletes items whose staleness exceeds ``max_staleness``; item results get ``meta["staleness"]``."""

    def __init__(self, buffer: SlotBuffer, max_staleness: float) -> None:
        self.buffer = buffer
        self.max_staleness = max_staleness

    def push(self, chain: Chain, data: Any, meta: dict[str, Any] | None) -> BufferedData:
        if not meta or COLLECTED not in meta:
            raise ValueError(f"staleness_check: push with meta={{'{COLLECTED}': <train iter>}}")
        return chain(data, meta)

    def push_batch(
        self, chain: Chain, batch: Mapping[str, np.ndarray], meta: Mapping[str, np.ndarray] | None
    ) -> np.ndarray:
        if not meta or COLLECTED not in meta:
            raise ValueError(f"staleness_check: push_batch with meta['{COLLECTED}'] (one train iter per row)")
        return chain(batch, meta)

    def _drop_stale(self, kwargs: dict[str, Any]) -> int:
        if "train_iter_sample_data" not in kwargs:
            raise ValueError("staleness_check: sample with train_iter_sample_data=<current train iter>")
        now = int(kwargs.pop("train_iter_sample_data"))
        slots = self.buffer.ordered_slots()
        if len(slots):
            stale = now - self.buffer.meta_column(COLLECTED, slots) > self.max_staleness
            if stale.any():
                self.buffer.delete(self.buffer.ids_at(slots[stale]))
        return now

    def sample(self, chain: Chain, **kwargs: Any) -> list[Any]:
        now = self._drop_stale(kwargs)
        result = chain(**kwargs)
        for item in flat_items(result):
            item.meta["staleness"] = now - int(item.meta[COLLECTED])
        return result

    def sample_batch(self, chain: Chain, **kwargs: Any) -> SampledBatch:
        self._drop_stale(kwargs)
        return chain(**kwargs)


def staleness_check(buffer_: SlotBuffer, max_staleness: float = float("inf")) -> StalenessCheck:
    """Middleware that drops items older than ``max_staleness`` train iterations before sampling."""
    return StalenessCheck(buffer_, max_staleness)
