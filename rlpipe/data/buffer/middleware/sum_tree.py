"""A vectorised sum tree (with an optional min tree) over a fixed number of leaves.

The tree is 8-ary: the 8 children of a node sit side by side in one 64-byte cache line, so
a root-to-leaf walk over a million leaves touches 7 lines instead of a binary tree's 20.
Levels are stored one after another in one flat array (``offsets[level]``); child ``c`` of
node ``i`` of level ``L`` is node ``8 i + c`` of level ``L + 1``.

Batch update and batch prefix search walk the tree level by level with numpy operations
on the whole batch: O(batch * log n) work, O(log n) numpy calls, no Python loop per item.
Parents are recomputed from their children (never updated by deltas), so no rounding drift.
When numba is installed (it comes with the ``bench`` extra) the same level-by-level walks
run as compiled loops, which skip numpy's per-call overhead and temporary arrays.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

BRANCH = 8
BACKENDS = ("numpy", "numba")


def _compile_kernels() -> dict[str, Callable[..., Any]] | None:
    """The compiled update and search loops, or None without numba."""
    try:
        import numba
    except ImportError:
        return None

    @numba.njit(cache=True)
    def update(sums, mins, offsets, positions, values):  # pragma: no cover - compiled
        track_min = mins.shape[0] > 0
        depth = offsets.shape[0] - 1
        nodes = positions.copy()
        for j in range(nodes.shape[0]):
            sums[offsets[depth] + nodes[j]] = values[j]
            if track_min:
                mins[offsets[depth] + nodes[j]] = values[j] if values[j] > 0 else np.inf
        for level in range(depth - 1, -1, -1):
            first_child = offsets[level + 1]
            for j in range(nodes.shape[0]):
                node = nodes[j] // 8
                nodes[j] = node
                c = first_child + 8 * node
                # the same association as _sum8, so both backends agree bit for bit
                sums[offsets[level] + node] = ((sums[c] + sums[c + 1]) + (sums[c + 2] + sums[c + 3])) + (
                    (sums[c + 4] + sums[c + 5]) + (sums[c + 6] + sums[c + 7])
                )
                if track_min:
                    low = mins[c]
                    for k in range(1, 8):
                        low = min(low, mins[c + k])
                    mins[offsets[level] + node] = low

    @numba.njit(cache=True)
    def find(sums, offsets, targets, out):  # pragma: no cover - compiled
        depth = offsets.shape[0] - 1
        values = targets.copy()
        out[:] = 0
        for level in range(depth):
            first_child = offsets[level + 1]
            for j in range(values.shape[0]):
                child = first_child + 8 * out[j]
                chosen = -1
                last_positive = 0
                for c in range(8):
                    weight = sums[child + c]
                    if weight > 0:
                        last_positive = c
                        if chosen < 0 and values[j] < weight:
                            chosen = c
                        elif chosen < 0:
                            values[j] -= weight
                if chosen < 0:  # rounding pushed the target past the end: take the last non-empty
                    chosen = last_positive
                    values[j] += sums[child + chosen]
                out[j] = 8 * out[j] + chosen

    return {"update": update, "find": find}


_KERNELS = _compile_kernels()
DEFAULT_BACKEND = "numba" if _KERNELS is not None else "numpy"


def _sum8(children: np.ndarray) -> np.ndarray:
    """Row sums of [n, 8] children, in a fixed pairwise order (numpy's own order may vary)."""
    c = children
    return ((c[:, 0] + c[:, 1]) + (c[:, 2] + c[:, 3])) + ((c[:, 4] + c[:, 5]) + (c[:, 6] + c[:, 7]))


class SumTree:
    """Sums (and, with ``track_min``, minima of the positive leaves) of ``capacity`` leaves."""

    def __init__(self, capacity: int, track_min: bool = True, backend: str | None = None) -> None:
        backend = backend or DEFAULT_BACKEND
        if backend not in BACKENDS or (backend == "numba" and _KERNELS is None):
            raise ValueError(f"SumTree backend {backend!r} is not available (have: {DEFAULT_BACKEND})")
        self.backend = backend
        self._kernels = _KERNELS if backend == "numba" else None
        self.capacity = int(capacity)
        self.depth = 0
        while BRANCH**self.depth < self.capacity:
            self.depth += 1
        sizes = [BRANCH**level for level in range(self.depth + 1)]
        starts = [0, BRANCH] + [0] * self.depth  # the root is padded to a whole line
        for level in range(1, self.depth + 1):
            starts[level + 1] = starts[level] + sizes[level]
        self.offsets = np.array(starts[: self.depth + 1], dtype=np.int64)
        length = int(self.offsets[-1]) + sizes[-1]
        self.sums = np.zeros(length, dtype=np.float64)
        self.mins = np.full(length, np.inf) if track_min else None

    def _level(self, array: np.ndarray, level: int) -> np.ndarray:
        """The nodes of ``level`` grouped by parent: shape [nodes of level - 1, 8]."""
        start = int(self.offsets[level])
        return array[start : start + BRANCH**level].reshape(-1, BRANCH)

    @property
    def total(self) -> float:
        """Sum of all leaves."""
        return float(self.sums[0])

    @property
    def min(self) -> float:
        """Smallest positive leaf (inf when none)."""
        if self.mins is None:
            raise ValueError("this SumTree was built with track_min=False")
        return float(self.mins[0])

    def leaves(self, positions: np.ndarray | None = None) -> np.ndarray:
        """Leaf values (all of them, or those at ``positions``)."""
        start = int(self.offsets[-1])
        if positions is None:
            return self.sums[start : start + self.capacity]
        return self.sums[start + np.asarray(positions)]

    def update(self, positions: np.ndarray, values: np.ndarray | float) -> None:
        """Set leaves ``positions`` to ``values`` (>= 0; 0 = never sampled), then their ancestors."""
        node = np.asarray(positions, dtype=np.int64).reshape(-1)
        if node.size == 0:
            return
        values = np.ascontiguousarray(np.broadcast_to(np.asarray(values, dtype=np.float64), node.shape))
        if self._kernels is not None:
            no_mins = np.zeros(0)
            self._kernels["update"](
                self.sums, self.mins if self.mins is not None else no_mins, self.offsets, node, values
            )
            return
        sums, mins = self.sums, self.mins
        sums[self.offsets[-1] + node] = values
        if mins is not None:
            mins[self.offsets[-1] + node] = np.where(values > 0, values, np.inf)
        for level in range(self.depth - 1, -1, -1):
            node = node // BRANCH
            sums[self.offsets[level] + node] = _sum8(self._level(sums, level + 1)[node])
            if mins is not None:
                mins[self.offsets[level] + node] = self._level(mins, level + 1)[node].min(axis=1)

    def rebuild(self, values: np.ndarray) -> None:
        """Set every leaf at once (e.g. after loading) and recompute all parents."""
        values = np.asarray(values, dtype=np.float64)
        if values.shape != (self.capacity,):
            raise ValueError(f"SumTree.rebuild needs {self.capacity} leaves, got shape {values.shape}")
        self.sums[:] = 0.0
        self.sums[self.offsets[-1] : self.offsets[-1] + self.capacity] = values
        if self.mins is not None:
            self.mins[:] = np.inf
            self.mins[self.offsets[-1] : self.offsets[-1] + self.capacity] = np.where(
                values > 0, values, np.inf
            )
        for level in range(self.depth - 1, -1, -1):
            start, count = int(self.offsets[level]), BRANCH**level
            self.sums[start : start + count] = _sum8(self._level(self.sums, level + 1))
            if self.mins is not None:
                self.mins[start : start + count] = self._level(self.mins, level + 1).min(axis=1)

    def find(self, targets: np.ndarray) -> np.ndarray:
        """Leaf positions where the running sum of leaves first exceeds each target.

        ``targets`` should lie in ``[0, total)``; a target that rounding pushes past the end
        of a node's children goes to its last non-empty child, so no empty leaf is returned.
        """
        values = np.array(targets, dtype=np.float64).reshape(-1)
        node = np.zeros(len(values), dtype=np.int64)
        if self._kernels is not None:
            self._kernels["find"](self.sums, self.offsets, values, node)
            return node
        rows = np.arange(len(values))
        for level in range(self.depth):
            children = self._level(self.sums, level + 1)[node]
            before = np.cumsum(children, axis=1)
            chosen = np.count_nonzero(before <= values[:, None], axis=1)
            positive = children > 0
            last_positive = BRANCH - 1 - np.argmax(positive[:, ::-1], axis=1)
            chosen = np.minimum(chosen, last_positive)
            values -= before[rows, chosen] - children[rows, chosen]
            node = node * BRANCH + chosen
        return node
