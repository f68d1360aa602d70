"""use_time_check: items disappear after max_use samples; counts restart for new items."""

from __future__ import annotations

import numpy as np
import pytest

from rlpipe.data import DequeBuffer, use_time_check


def test_items_deleted_after_max_use() -> None:
    buf = DequeBuffer(4, seed=0)
    buf.use(use_time_check(buf, max_use=2))
    buf.push_batch({"x": np.arange(4)})
    first = buf.sample(4)
    assert {item.meta["use_count"] for item in first} == {1}
    assert buf.count() == 4
    buf.sample_batch(4)
    assert buf.count() == 0


def test_overwritten_slot_starts_fresh_and_groups_count() -> None:
    buf = DequeBuffer(2, seed=0)
    buf.use(use_time_check(buf, max_use=2))
    buf.push_batch({"x": np.arange(2)}, {"env": np.array([0, 0])})
    buf.sample(1, groupby="env")  # both items used once
    buf.push({"x": 5}, {"env": 1})  # replaces id 0
    buf.sample_batch(2)
    assert [buf.get(i).index for i in range(buf.count())] == [2]
    with pytest.raises(ValueError, match="max_use must be >= 1"):
        use_time_check(buf, max_use=0)
