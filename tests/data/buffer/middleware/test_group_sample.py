"""group_sample: each sampled group trimmed to size_in_group items."""

from __future__ import annotations

import numpy as np
import pytest

from rlpipe.data import DequeBuffer, group_sample


def grouped_buffer(middleware) -> DequeBuffer:
    buf = DequeBuffer(20, seed=0).use(middleware)
    buf.push_batch({"t": np.arange(10)}, {"env": np.array([0] * 6 + [1] * 4)})
    return buf


def test_ordered_windows_are_consecutive() -> None:
    buf = grouped_buffer(group_sample(3, ordered_in_group=True, seed=0))
    for group in buf.sample(2, groupby="env"):
        ts = [int(item.data["t"]) for item in group]
        assert len(ts) == 3 and np.all(np.diff(ts) == 1)


def test_unordered_max_use_avoids_repeats_until_needed() -> None:
    buf = grouped_buffer(group_sample(5, ordered_in_group=False, max_use_in_group=True, seed=0))
    groups = {int(g[0].meta["env"]): g for g in buf.sample(2, groupby="env")}
    assert len({item.index for item in groups[0]}) == 5  # 6 items: no repeat
    assert len({item.index for item in groups[1]}) == 4  # 4 items: all used, one repeat
    buf = grouped_buffer(group_sample(50, ordered_in_group=False, max_use_in_group=False, seed=0))
    assert all(len(g) == 50 for g in buf.sample(2, groupby="env"))


def test_needs_groupby() -> None:
    buf = grouped_buffer(group_sample(2))
    with pytest.raises(ValueError, match="groupby"):
        buf.sample(1)
