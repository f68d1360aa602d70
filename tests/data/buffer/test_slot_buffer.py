"""SlotBuffer and SavableBuffer: DequeBuffer satisfies them, and buffer middleware run over any
buffer that implements SlotBuffer alone (here a list-backed fake with no ring storage)."""

from __future__ import annotations

from typing import Any

import numpy as np

from rlpipe.data import DequeBuffer, PriorityExperienceReplay, sample_range_view, staleness_check, use_time_check
from rlpipe.data.buffer import SavableBuffer, SlotBuffer
from rlpipe.data.buffer.base import BufferedData, BufferMiddleware
from rlpipe.data.buffer.storage import Located


class ListBuffer:
    """A buffer of ``size`` slots on Python lists (item id ``i`` lives in slot ``i % size``).

    It implements SlotBuffer and, to drive one middleware, the item API's push, sample and
    delete, each passed through that middleware's method around the list operation.
    """

    holds_tensors = False

    def __init__(self, size: int, seed: int) -> None:
        self.size = size
        self.rng = np.random.default_rng(seed)
        self.slot_ids = [-1] * size
        self.data: list[Any] = [None] * size
        self.meta: list[dict[str, Any]] = [{} for _ in range(size)]
        self.next_id = 0
        self.mw = BufferMiddleware()

    # ---- SlotBuffer ----------------------------------------------------------------
    def count(self) -> int:
        return sum(i >= 0 for i in self.slot_ids)

    def delete(self, index: Any) -> None:
        self.mw.delete(self._delete, np.asarray(index, dtype=np.int64).reshape(-1))

    def locate(self, ids: np.ndarray) -> Located:
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        slots = ids % self.size
        exists = np.array([self.slot_ids[s] == i for s, i in zip(slots, ids, strict=True)], dtype=bool)
        return Located(slots, exists, int(exists.sum()))

    def ids_at(self, slots: np.ndarray) -> np.ndarray:
        return np.array([self.slot_ids[s] for s in np.asarray(slots).reshape(-1)], dtype=np.int64)

    def ordered_slots(self) -> np.ndarray:
        stored = sorted(i for i in self.slot_ids if i >= 0)
        return np.array([i % self.size for i in stored], dtype=np.int64)

    def meta_column(self, key: str, slots: np.ndarray) -> np.ndarray:
        return np.array([self.meta[s][key] for s in slots])

    # ---- the item API, through one middleware ----------------------------------------
    def use(self, mw: BufferMiddleware) -> ListBuffer:
        self.mw = mw
        return self

    def push(self, data: Any, meta: dict[str, Any] | None = None) -> BufferedData:
        return self.mw.push(self._push, data, meta)

    def sample(self, **kwargs: Any) -> list[Any]:
        return self.mw.sample(self._sample, **kwargs)

    def _push(self, data: Any, meta: dict[str, Any] | None) -> BufferedData:
        index, slot = self.next_id, self.next_id % self.size
        self.slot_ids[slot], self.data[slot], self.meta[slot] = index, data, dict(meta or {})
        self.next_id += 1
        return BufferedData(data, index, dict(meta or {}))

    def _sample(
        self, size: int | None = None, indices: Any = None, sample_range: slice | None = None, **_: Any
    ) -> list[BufferedData]:
        """The items with ``indices``, or the first ``size`` of ``stored[sample_range]`` (no draw)."""
        if indices is not None:
            slots = self.locate(indices).slots
        else:
            slots = self.ordered_slots()[sample_range or slice(None)][:size]
        return [BufferedData(self.data[s], self.slot_ids[s], dict(self.meta[s])) for s in slots.tolist()]

    def _delete(self, indices: np.ndarray) -> None:
        slots, exists, _ = self.locate(indices)
        for slot in slots[exists].tolist():
            self.slot_ids[slot] = -1


def test_deque_buffer_and_its_views_are_slot_and_savable_buffers() -> None:
    buf = DequeBuffer(4, seed=0)
    for candidate in (buf, buf.view()):
        assert isinstance(candidate, SlotBuffer)
        assert isinstance(candidate, SavableBuffer)


def test_the_fake_is_a_slot_buffer_and_not_a_savable_one() -> None:
    fake = ListBuffer(4, seed=0)
    assert isinstance(fake, SlotBuffer)
    assert not isinstance(fake, SavableBuffer)  # no storage to save
    assert not isinstance(object(), SlotBuffer)


def test_deque_buffer_slot_members_answer_from_its_storage() -> None:
    buf = DequeBuffer(3, seed=0)
    ids = buf.push_batch({"x": np.arange(4)}, meta={"m": np.array([10, 11, 12, 13])})  # id 0 is overwritten
    slots, exists, found = buf.locate(ids)
    assert exists.tolist() == [False, True, True, True] and found == 3
    assert buf.ids_at(slots[exists]).tolist() == [1, 2, 3]
    assert buf.ids_at(buf.ordered_slots()).tolist() == [1, 2, 3]
    assert buf.meta_column("m", buf.ordered_slots()).tolist() == [11, 12, 13]
    assert not buf.holds_tensors


def test_use_time_check_counts_and_deletes_on_a_non_deque_buffer() -> None:
    fake = ListBuffer(4, seed=0)
    fake.use(use_time_check(fake, max_use=2))
    ids = [fake.push(f"item{i}").index for i in range(3)]
    first = fake.sample(indices=ids[:2])
    assert [item.meta["use_count"] for item in first] == [1, 1]
    fake.sample(indices=ids[:1])
    assert fake.count() == 2 and fake.locate(np.array(ids)).exists.tolist() == [False, True, True]


def test_staleness_check_drops_stale_items_of_a_non_deque_buffer() -> None:
    fake = ListBuffer(4, seed=0)
    fake.use(staleness_check(fake, max_staleness=6))
    for collected in (0, 4, 8):
        fake.push({"x": collected}, meta={"train_iter_data_collected": collected})
    items = fake.sample(size=3, train_iter_sample_data=10)
    assert [item.data["x"] for item in items] == [4, 8] and fake.count() == 2
    assert [item.meta["staleness"] for item in items] == [6, 2]


def test_sample_range_view_restricts_a_non_deque_buffer() -> None:
    fake = ListBuffer(4, seed=0)
    fake.use(sample_range_view(fake, start=-2))
    for i in range(4):
        fake.push(i)
    assert [item.data for item in fake.sample(size=4)] == [2, 3]


def test_priority_replay_draws_the_same_over_a_fake_as_over_a_deque_buffer() -> None:
    """Same seed, pushes and priorities: the same indices and IS weights, so PER needs only SlotBuffer."""
    fake = ListBuffer(5, seed=3)
    fake.use(PriorityExperienceReplay(fake, IS_weight_anneal_train_iter=10))
    real = DequeBuffer(5, seed=3)
    real.use(PriorityExperienceReplay(real, IS_weight_anneal_train_iter=10))
    for i, priority in enumerate([0.5, 4.0, 1.0, 0.0, 2.0, 8.0]):  # the sixth push overwrites the first
        fake.push(i, meta={"priority": priority})
        real.push(i, meta={"priority": priority})
    for _ in range(3):
        drawn_fake, drawn_real = fake.sample(size=4, replace=True), real.sample(size=4, replace=True)
        assert [item.index for item in drawn_fake] == [item.index for item in drawn_real]
        assert [item.meta["priority_IS"] for item in drawn_fake] == [item.meta["priority_IS"] for item in drawn_real]
        assert [item.meta["priority"] for item in drawn_fake] == [item.meta["priority"] for item in drawn_real]
    assert 3 not in [item.index for item in fake.sample(size=50, replace=True)]  # priority 0: never drawn
    fake.delete([5])
    assert fake.mw.tree.leaves(np.array([0]))[0] == 0.0  # the deleted item's leaf is emptied
