"""The per-sequence table of :class:`~rlpipe.data.buffer.sequence.SequenceBuffer`: which
sequences are available, where their steps lie in the row ring, and their priorities.

A sequence gets its id (a monotonic counter) when it becomes available, so ids follow the order
sequences complete in. It lives in slot ``id % capacity`` of the table, which keeps its length
and the start of its *entries*: the row slots of its steps, written one sequence after the
other into an entry ring. Gathering a sequence's steps is then index arithmetic:
``entries[(start + arange(T)) % entry_capacity]``, O(batch * T) with no scan of the buffer.

A sequence leaves the index when the row of its first step is overwritten (its oldest step,
so the first of its steps the ring overwrites): each row slot remembers the sequence that
starts there. Sampling draws from the available ones only: uniformly from a dense array of
their slots (removal swaps the last one into the hole), or in proportion to ``p ** alpha``
from a sum tree over the slots.

Sizes: ``capacity = rows + SLACK`` slots and ``ceil(T / stride) * rows + SLACK * T`` entries.
Each stored sequence has a first row of its own and each row is a step of at most
``ceil(T / stride)`` sequences, so only sequences that straddle the ring's oldest end (at most
``ceil(T / stride)`` per env) come on top; ``SLACK`` covers 1024 of them. Beyond that (more than
about a thousand envs pushing into one buffer) the oldest sequences leave the index a little
before their first row is overwritten, never later.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from rlpipe.data.buffer.middleware.priority import PRIORITY_EPS
from rlpipe.data.buffer.middleware.sum_tree import SumTree
from rlpipe.data.buffer.sampling import choose

SLACK = 1024
"""Spare slots (and ``SLACK * T`` spare entries) for sequences straddling the ring's oldest end."""


def check_priorities(priority: np.ndarray) -> np.ndarray:
    """``priority`` as contiguous float64; ValueError naming a value that is negative, NaN or infinite
    (an infinite priority would take every draw and silently end learning)."""
    values = np.ascontiguousarray(priority, dtype=np.float64).reshape(-1)
    bad = ~(np.isfinite(values) & (values >= 0))
    if bad.any():
        raise ValueError(f"priorities must be finite and >= 0, got {values[bad][0]}")
    return values


class SequenceIndex:
    """Available sequences over a ring of ``rows`` row slots (row slot ``rows`` is the zero padding row).

    ``alpha``: draw in proportion to ``priority ** alpha`` (None: uniformly, no priorities kept).
    """

    def __init__(self, rows: int, sequence_len: int, stride: int, alpha: float | None = None) -> None:
        self.rows = rows
        self.sequence_len = sequence_len
        self.capacity = rows + SLACK
        self.entry_capacity = math.ceil(sequence_len / stride) * rows + SLACK * sequence_len
        self.alpha = alpha
        self.tree = SumTree(self.capacity) if alpha is not None else None
        self.ids = np.full(self.capacity, -1, dtype=np.int64)
        """Id of the sequence in each slot; -1 when it is gone (its row overwritten, or deleted)."""
        self.entry = np.zeros(self.capacity, dtype=np.int64)
        """Entry counter of each slot's first step (kept after the sequence goes: ids stay ordered)."""
        self.length = np.zeros(self.capacity, dtype=np.int64)
        self.entries = np.zeros(self.entry_capacity, dtype=np.int64)
        self.available = np.zeros(self.capacity, dtype=np.int64)
        """Slots of the available sequences in ``available[:count]`` (in no particular order)."""
        self.position = np.full(self.capacity, -1, dtype=np.int64)
        """Where each available slot is in ``available``; -1 for others."""
        self.row_sequence = np.full(rows, -1, dtype=np.int64)
        """Id of the sequence whose first step is at each row slot (or -1)."""
        self.count = 0
        self.next_id = 0
        self.first_id = 0
        """Ids below this have no slot any more (each id in [first_id, next_id) has its own)."""
        self.next_entry = 0
        self.max_priority = 1.0

    # ---- lookup ----------------------------------------------------------------------
    def locate(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Slots of ``ids`` (int64 [n]) and whether each still names an available sequence."""
        slots = ids % self.capacity
        return slots, (self.ids[slots] == ids) & (ids >= 0)

    def rows_of(self, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Row slots [B, T] of the steps of the sequences at ``slots`` (the padding row ``rows``
        after a sequence's length) and the mask [B, T] of real steps."""
        t = np.arange(self.sequence_len)
        mask = t < self.length[slots][:, None]
        rows = self.entries.take((self.entry[slots][:, None] + t) % self.entry_capacity)
        rows[~mask] = self.rows
        return rows, mask

    def ordered_slots(self) -> np.ndarray:
        """Slots of the available sequences, oldest id first (a sort: not for the hot path)."""
        slots = self.available[: self.count]
        return slots[np.argsort(self.ids[slots], kind="stable")]

    def priority_of(self, slots: np.ndarray) -> np.ndarray:
        """Current priorities of the sequences at ``slots`` (read back from the tree's leaves)."""
        if self.tree is None or self.alpha is None:
            raise ValueError("this index keeps no priorities")
        if self.alpha == 0:
            return np.ones(len(slots))  # every leaf is 1: the priority itself is not kept
        return np.maximum(self.tree.leaves(slots) ** (1.0 / self.alpha) - PRIORITY_EPS, 0.0)

    # ---- drawing ---------------------------------------------------------------------
    def draw(
        self, rng: np.random.Generator, n: int, replace: bool, beta: float
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Slots of ``n`` available sequences (the caller checked there are enough) and, with
        priorities, their float32 importance-sampling weights.

        Uniform: ``n`` of the available (distinct unless ``replace``). With priorities: one from each
        of ``n`` equal strata of the priority mass (a sequence may come more than once), weighted
        ``(p_i ** alpha / min_k p_k ** alpha) ** -beta``: the weight PER gives, divided by the
        largest weight any stored sequence could get.
        """
        if self.tree is None:
            return self.available[choose(rng, self.count, n, replace)], None
        return self.tree.stratified_weights(rng.random(n), beta)

    def set_priority(self, ids: np.ndarray, priority: np.ndarray) -> np.ndarray:
        """Set the priorities of those of ``ids`` still stored; returns which are."""
        values = check_priorities(priority)
        slots, exists = self.locate(ids)
        if self.tree is not None and self.alpha is not None:
            top = self.tree.update_priorities(slots, values, exists, self.alpha, PRIORITY_EPS)
            self.max_priority = max(self.max_priority, top)
        return exists

    # ---- adding and removing ---------------------------------------------------------
    def add(self, first_rows: np.ndarray, lengths: np.ndarray, rows: np.ndarray,
            priority: np.ndarray | None = None) -> None:
        """Make sequences available, in order: their first row slots [M], lengths [M] and the row
        slots of all their steps, one sequence after the other (``lengths.sum()`` of them); with
        priorities, at ``priority`` [M] (None: the largest seen)."""
        m = len(lengths)
        if m == 0:
            return
        ids = self.next_id + np.arange(m, dtype=np.int64)
        starts = self.next_entry + np.cumsum(lengths) - lengths
        end = self.next_entry + int(lengths.sum())
        # Entries [end - entry_capacity, end) stay: older sequences lose theirs. A new id takes the slot
        # of the id ``capacity`` below it. Both drop new sequences only in a push larger than the index.
        lowest_owner = self.next_id + m - self.capacity
        self._forget_ids_below(max(self._first_id_from(end - self.entry_capacity), lowest_owner))
        owned = ids >= lowest_owner
        keep = owned & (starts >= end - self.entry_capacity)
        slots = ids[owned] % self.capacity
        self.ids[slots] = np.where(keep[owned], ids[owned], -1)
        self.entry[slots] = starts[owned]
        self.length[slots] = lengths[owned]
        step_kept = np.repeat(keep, lengths)
        positions = (self.next_entry + np.flatnonzero(step_kept)) % self.entry_capacity
        self.entries[positions] = rows[step_kept]
        self.row_sequence[first_rows[keep]] = ids[keep]
        self._list(ids[keep] % self.capacity, None if priority is None else priority[keep])
        self.next_id += m
        self.next_entry = end

    def _first_id_from(self, entry: int) -> int:
        """The smallest id in [first_id, next_id) whose entries start at or after ``entry``."""
        ids = range(self.first_id, self.next_id)
        return self.first_id + bisect.bisect_left(ids, entry, key=lambda i: int(self.entry[i % self.capacity]))

    def _forget_ids_below(self, first_id: int) -> None:
        """Drop the sequences with ids below ``first_id``: their slots or entries are about to be reused."""
        if first_id <= self.first_id:
            return
        ids = np.arange(self.first_id, min(first_id, self.next_id), dtype=np.int64)
        slots, exists = self.locate(ids)
        self._unlist(slots[exists])
        self.first_id = first_id

    def forget_rows(self, row_slots: np.ndarray) -> None:
        """The rows at ``row_slots`` are overwritten: the sequences starting there are gone."""
        ids = self.row_sequence[row_slots]
        ids = ids[ids >= 0]
        slots, exists = self.locate(ids)
        self._unlist(slots[exists])
        self.row_sequence[row_slots] = -1

    def remove(self, ids: np.ndarray) -> None:
        """Make the sequences with ``ids`` unavailable (ids not stored are ignored)."""
        slots, exists = self.locate(np.unique(ids))
        self._unlist(slots[exists])

    def _list(self, slots: np.ndarray, priority: np.ndarray | None) -> None:
        """Add available ``slots`` (new, distinct) to the dense array and, with priorities, the tree at
        ``priority`` (None: the largest seen)."""
        n = len(slots)
        self.available[self.count : self.count + n] = slots
        self.position[slots] = self.count + np.arange(n)
        self.count += n
        if self.tree is not None and self.alpha is not None:
            values = np.full(n, self.max_priority) if priority is None else check_priorities(priority)
            top = self.tree.update_priorities(slots, values, np.ones(n, dtype=bool), self.alpha, PRIORITY_EPS)
            self.max_priority = max(self.max_priority, top)

    def _unlist(self, slots: np.ndarray) -> None:
        """Remove available ``slots`` (distinct): the last ones of the dense array fill their holes."""
        k = len(slots)
        if k == 0:
            return
        remaining = self.count - k
        where = self.position[slots]
        removed_at_tail = np.zeros(k, dtype=bool)
        removed_at_tail[where[where >= remaining] - remaining] = True
        movers = self.available[remaining : self.count][~removed_at_tail]
        holes = np.sort(where[where < remaining])
        self.available[holes] = movers
        self.position[movers] = holes
        self.position[slots] = -1
        self.ids[slots] = -1
        self.count = remaining
        if self.tree is not None:
            self.tree.update(slots, 0.0)

    def clear(self) -> None:
        """Forget every sequence (ids and entry counters keep counting)."""
        self._unlist(self.available[: self.count].copy())
        self.row_sequence[:] = -1
        self.first_id = self.next_id
        self.max_priority = 1.0

    # ---- state -----------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The whole table (numpy arrays) and its counters (numbers)."""
        state: dict[str, Any] = {
            "ids": self.ids.copy(),
            "entry": self.entry.copy(),
            "length": self.length.copy(),
            "entries": self.entries.copy(),
            "available": self.available[: self.count].copy(),
            "row_sequence": self.row_sequence.copy(),
            "next_id": self.next_id,
            "first_id": self.first_id,
            "next_entry": self.next_entry,
            "max_priority": self.max_priority,
        }
        if self.tree is not None:
            state["leaves"] = self.tree.leaves().copy()
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned; ValueError (changing nothing) if it does not fit."""
        shapes = {"ids": self.capacity, "entry": self.capacity, "length": self.capacity,
                  "entries": self.entry_capacity, "row_sequence": self.rows}
        if self.tree is not None:
            shapes["leaves"] = self.capacity
        for key, n in shapes.items():
            value = np.asarray(state[key])
            if value.shape != (n,) or value.dtype.kind not in ("f" if key == "leaves" else "iu"):
                raise ValueError(f"sequence index '{key}' has {value.dtype} of shape {value.shape}, expected ({n},)")
        available = np.asarray(state["available"], dtype=np.int64)
        if available.ndim != 1 or not np.array_equal(np.sort(available), np.flatnonzero(np.asarray(state["ids"]) >= 0)):
            raise ValueError("sequence index 'available' does not list the stored sequences")
        for key in ("ids", "entry", "length", "entries", "row_sequence"):
            getattr(self, key)[:] = state[key]
        self.count = len(available)
        self.available[: self.count] = available
        self.position[:] = -1
        self.position[available] = np.arange(self.count)
        self.next_id, self.first_id = int(state["next_id"]), int(state["first_id"])
        self.next_entry, self.max_priority = int(state["next_entry"]), float(state["max_priority"])
        if self.tree is not None:
            self.tree.rebuild(state["leaves"])
