"""staleness_check: stale items are dropped before sampling; staleness reported in meta."""

from __future__ import annotations

import numpy as np
import pytest

from rlpipe.data import DequeBuffer, staleness_check


def test_stale_items_dropped_and_staleness_reported() -> None:
    buf = DequeBuffer(8, seed=0)
    buf.use(staleness_check(buf, max_staleness=2))
    buf.push_batch({"x": np.arange(4)}, {"train_iter_data_collected": np.array([0, 1, 2, 3])})
    items = buf.sample(2, train_iter_sample_data=3)  # staleness 3 > 2 -> id 0 dropped
    assert buf.count() == 3
    assert all(item.meta["staleness"] == 3 - int(item.meta["train_iter_data_collected"]) for item in items)
    batch = buf.sample_batch(2, replace=True, train_iter_sample_data=5)  # keeps collected >= 3
    assert buf.count() == 1 and batch.indices.tolist() == [3, 3]


def test_push_and_sample_need_their_iteration_numbers() -> None:
    buf = DequeBuffer(8)
    buf.use(staleness_check(buf, max_staleness=1))
    with pytest.raises(ValueError, match="train_iter_data_collected"):
        buf.push({"x": 1})
    with pytest.raises(ValueError, match="train_iter_data_collected"):
        buf.push_batch({"x": np.arange(2)})
    buf.push({"x": 1}, {"train_iter_data_collected": 0})
    with pytest.raises(ValueError, match="train_iter_sample_data"):
        buf.sample(1)
