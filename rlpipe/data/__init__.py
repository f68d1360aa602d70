"""Data: replay buffers, their middleware, and n-step transitions."""

from rlpipe.data.buffer import Buffer, BufferedData, BufferMiddleware, DequeBuffer, SampledBatch
from rlpipe.data.buffer.middleware import (
    FrameStore,
    PriorityExperienceReplay,
    clone_object,
    group_sample,
    padding,
    sample_range_view,
    staleness_check,
    use_time_check,
)
from rlpipe.data.nstep import NStepAccumulator

__all__ = [
    "Buffer",
    "BufferMiddleware",
    "BufferedData",
    "DequeBuffer",
    "FrameStore",
    "NStepAccumulator",
    "PriorityExperienceReplay",
    "SampledBatch",
    "clone_object",
    "group_sample",
    "padding",
    "sample_range_view",
    "staleness_check",
    "use_time_check",
]
