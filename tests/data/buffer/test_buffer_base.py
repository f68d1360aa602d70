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
