"""The middleware chain: order, argument and result rewriting, and use() checks."""

from __future__ import annotations

import numpy as np
import pytest

from rlpipe.data import BufferMiddleware, DequeBuffer


def test_first_middleware_is_outermost() -> None:
    trace = []

    def tagger(name):
        def mw(action, chain, *args, **kwargs):
            trace.append(f"{name}>{action}")
            result = chain(*args, **kwargs)
            trace.append(f"{name}<{action}")
            return result

        return mw

    buf = DequeBuffer(4).use(tagger("a")).use(tagger("b"))
    buf.push({"x": 1})
    assert trace == ["a>push", "b>push", "b<push", "a<push"]


def test_middleware_rewrites_arguments_and_results() -> None:
    class AddMeta(BufferMiddleware):
        def push(self, chain, data, meta):
            return chain(data, {**(meta or {}), "tag": "m"})

        def sample_batch(self, chain, **kwargs):
            batch = chain(**kwargs)
            batch.data["seen"] = np.ones(len(batch.indices))
            return batch

    buf = DequeBuffer(4, seed=0).use(AddMeta())
    buf.push({"x": 1.0})
    assert buf.get(0).meta == {"tag": "m"}
    assert buf.sample_batch(1).data["seen"].tolist() == [1.0]
    assert AddMeta().state_dict() == {}


def test_use_rejects_non_callables_and_size_must_be_positive() -> None:
    with pytest.raises(TypeError, match="must be callable"):
        DequeBuffer(2).use(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="size must be positive"):
        DequeBuffer(0)


def test_use_after_operations_joins_the_chain() -> None:
    """The chain of each operation is built once: use() must still reach later calls."""
    seen = []

    def spy(action, chain, *args, **kwargs):
        seen.append(action)
        return chain(*args, **kwargs)

    buf = DequeBuffer(4, seed=0)
    ids = buf.push_batch({"x": np.arange(3.0)})
    buf.sample_batch(2)
    buf.update_batch(ids, {"m": np.zeros(3)})
    buf.use(spy)
    buf.sample_batch(2)
    buf.update_batch(ids, {"m": np.ones(3)})
    assert seen == ["sample_batch", "update_batch"]


def test_update_priority_runs_through_the_chain_and_a_plain_buffer_ignores_it() -> None:
    class Recorder(BufferMiddleware):
        updates_priority = True

        def __init__(self) -> None:
            self.seen: list[tuple[list[int], list[float]]] = []

        def update_priority(self, chain, indices, priority):
            self.seen.append((indices.tolist(), priority.tolist()))
            return chain(indices, priority)

    plain = DequeBuffer(4, seed=0)
    ids = plain.push_batch({"x": np.arange(4.0)}, {"m": np.zeros(4)})
    plain.update_priority(ids, np.ones(4))  # nothing keeps priorities here: nothing changes
    assert not plain.has_priority_replay and list(plain.storage.meta.columns) == ["m"]
    assert [plain.get(i).meta for i in range(4)] == [{"m": 0.0}] * 4
    with pytest.raises(ValueError, match=r"priority has shape \(3,\), indices have shape \(4,\)"):
        plain.update_priority(ids, np.ones(3))  # a wrong call fails with or without priority replay

    recorder = Recorder()
    buf = DequeBuffer(4).use(recorder)
    assert buf.has_priority_replay
    buf.update_priority(np.array([[0, 1], [2, 3]]), [5.0, 6.0])  # one priority per sequence, flattened
    assert recorder.seen == [([0, 1, 2, 3], [5.0, 5.0, 6.0, 6.0])]
