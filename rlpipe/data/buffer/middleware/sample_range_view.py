"""sample_range_view: sample only from a slice of the stored items (oldest first)."""

from __future__ import annotations

from typing import Any

from rlpipe.data.buffer.base import BufferMiddleware, Chain, SampledBatch, SlotBuffer


class SampleRangeView(BufferMiddleware):
    """Sets ``sample_range=slice(start, end)`` on every sample call (e.g. ``start=-1000``: newest 1000)."""

    def __init__(self, buffer: SlotBuffer, start: int | None, end: int | None) -> None:
        self.buffer = buffer
        self.range = slice(start, end)

    def _restrict(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        if kwargs.get("sample_range") is not None:
            raise ValueError("sample_range_view already fixes sample_range; do not pass one")
        return {**kwargs, "sample_range": self.range}

    def sample(self, chain: Chain, **kwargs: Any) -> list[Any]:
        return chain(**self._restrict(kwargs))

    def sample_batch(self, chain: Chain, **kwargs: Any) -> SampledBatch:
        return chain(**self._restrict(kwargs))


def sample_range_view(
    buffer_: SlotBuffer, start: int | None = None, end: int | None = None
) -> SampleRangeView:
    """Middleware restricting sampling to ``stored_items[start:end]``, oldest first."""
    if start is None and end is None:
        raise ValueError("sample_range_view needs start or end")
    return SampleRangeView(buffer_, start, end)
