"""Replay buffers: the Buffer contract, what middleware need of a buffer (SlotBuffer), the
ring-storage DequeBuffer, the SequenceBuffer of recurrent agents and buffer middleware."""

from rlpipe.data.buffer.base import (
    Buffer,
    BufferedData,
    BufferMiddleware,
    SampledBatch,
    SavableBuffer,
    SlotBuffer,
)
from rlpipe.data.buffer.deque_buffer import DequeBuffer
from rlpipe.data.buffer.sequence import SequenceBuffer

__all__ = [
    "Buffer",
    "BufferMiddleware",
    "BufferedData",
    "DequeBuffer",
    "SampledBatch",
    "SavableBuffer",
    "SequenceBuffer",
    "SlotBuffer",
]
