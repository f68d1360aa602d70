"""sample_range_view: sampling restricted to a slice of the stored items."""

from __future__ import annotations

import numpy as np
import pytest

from rlpipe.data import DequeBuffer, sample_range_view


def test_only_the_newest_items_are_sampled_and_storage_is_shared() -> None:
    buf = DequeBuffer(10, seed=0)
    buf.push_batch({"x": np.arange(10)})
    recent = buf.view()
    recent.use(sample_range_view(recent, start=-3))
    assert {item.index for item in recent.sample(3)} == {7, 8, 9}
    assert set(recent.sample_batch(3).indices.tolist()) == {7, 8, 9}
    assert len(buf.sample(10)) == 10
    with pytest.raises(ValueError, match="only 3 available"):
        recent.sample(4)
    with pytest.raises(ValueError, match="already fixes"):
        recent.sample(1, sample_range=slice(0, 1))
    with pytest.raises(ValueError, match="start or end"):
        sample_range_view(buf)
