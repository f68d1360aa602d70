"""clone_object: callers and the buffer never share mutable objects."""

from __future__ import annotations

import numpy as np

from rlpipe.data import DequeBuffer, clone_object


def test_push_and_sample_are_copies() -> None:
    buf = DequeBuffer(4, seed=0).use(clone_object())
    payload = [1, [2, 3]]
    buf.push(payload)
    payload[1].append(4)
    sampled = buf.sample(1)[0].data
    assert sampled == [1, [2, 3]]
    sampled[1].append(5)
    assert buf.get(0).data == [1, [2, 3]]


def test_typed_rows_sampled_are_not_views() -> None:
    buf = DequeBuffer(4, seed=0).use(clone_object())
    buf.push({"obs": np.zeros(3)})
    buf.sample(1)[0].data["obs"][:] = 7
    np.testing.assert_array_equal(buf.get(0).data["obs"], np.zeros(3))
    buf.push({"info": {"a": 1}})
    batch = buf.sample_batch(1, indices=np.array([1]))
    batch.data["info"][0]["a"] = 2
    assert buf.get(1).data["info"] == {"a": 1}
