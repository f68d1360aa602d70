"""Buffer middleware: each wraps the buffer operations it changes (see ``Buffer.use``)."""

from rlpipe.data.buffer.middleware.clone import CloneObject, clone_object
from rlpipe.data.buffer.middleware.frame_store import FrameStore
from rlpipe.data.buffer.middleware.group_sample import GroupSample, group_sample
from rlpipe.data.buffer.middleware.padding import Padding, padding
from rlpipe.data.buffer.middleware.priority import PriorityExperienceReplay
from rlpipe.data.buffer.middleware.sample_range_view import SampleRangeView, sample_range_view
from rlpipe.data.buffer.middleware.staleness_check import StalenessCheck, staleness_check
from rlpipe.data.buffer.middleware.sum_tree import SumTree
from rlpipe.data.buffer.middleware.use_time_check import UseTimeCheck, use_time_check

__all__ = [
    "CloneObject",
    "FrameStore",
    "GroupSample",
    "Padding",
    "PriorityExperienceReplay",
    "SampleRangeView",
    "StalenessCheck",
    "SumTree",
    "UseTimeCheck",
    "clone_object",
    "group_sample",
    "padding",
    "sample_range_view",
    "staleness_check",
    "use_time_check",
]
