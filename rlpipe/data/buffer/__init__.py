"""Replay buffers: the Buffer contract, the ring-storage DequeBuffer and buffer middleware."""

from rlpipe.data.buffer.base import Buffer, BufferedData, BufferMiddleware, SampledBatch
from rlpipe.data.buffer.deque_buffer import DequeBuffer

__all__ = ["Buffer", "BufferMiddleware", "BufferedData", "DequeBuffer", "SampledBatch"]
