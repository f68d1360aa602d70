"""clone_object: copies going in and coming out, so callers never share objects with the buffer."""

from __future__ import annotations

import copy
from typing import Any

from rlpipe.data.buffer.base import BufferedData, BufferMiddleware, Chain, SampledBatch


class CloneObject(BufferMiddleware):
    """Deep-copies pushed data and sampled items (typed columns are copies already)."""

    def push(self, chain: Chain, data: Any, meta: dict[str, Any] | None) -> BufferedData:
        return chain(copy.deepcopy(data), meta)

    def sample(self, chain: Chain, **kwargs: Any) -> list[Any]:
        return copy.deepcopy(chain(**kwargs))

    def sample_batch(self, chain: Chain, **kwargs: Any) -> SampledBatch:
        batch = chain(**kwargs)
        data = {
            key: copy.deepcopy(value) if value.dtype == object else value for key, value in batch.data.items()
        }
        return SampledBatch(data, batch.indices)


def clone_object() -> CloneObject:
    """Middleware that deep-copies data on push and on sample."""
    return CloneObject()
