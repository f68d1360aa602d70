"""A vectorised sum tree (with an optional min tree) over a fixed number of leaves.

The tree is 8-ary: the 8 children of a node sit side by side in one 64-byte cache line, so
a root-to-leaf walk over a million leaves touches 7 lines instead of a binary tree's 20.
Levels are stored one after another in one flat array (``offsets[level]``); child ``c`` of
node ``i`` of level ``L`` is node ``8 i + c`` of level ``L + 1``.

Batch update and batch prefix search walk the tree level by level with numpy operations
on the whole batch: O(batch * log n) work, O(log n) numpy calls, no Python loop per item.
Parents are recomputed from their children (never updated by deltas), so no rounding drift.
A level with no more nodes than the batch has leaves (the top few) is recomputed whole:
cheaper than recomputing its few nodes once per updated leaf.
When numba is installed (it comes with the ``bench`` extra) the same level-by-level walks
run as compiled loops, which skip numpy's per-call overhead and temporary arrays.

The min tree covers the inner levels only: the minimum over a group of 8 leaves is taken
from the leaves themselves, so a leaf update touches one leaf array, not two.
:meth:`SumTree.stratified_weights` is prioritized replay's draw (stratified search and
the drawn leaves' IS weights) and :meth:`SumTree.update_priorities` its priority update
(check, ``(p + eps) ** alpha``, update): with numba, one compiled call each per training
step, as a step's fixed per-call costs are a large part of it at a batch of 256. The
compiled update keeps minima with a compare or two per leaf: a new value below its
parent's minimum lowers ancestors until one is lower still; only a change of the smallest
leaf itself recomputes upward, and stops where a minimum is unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

BRANCH = 8
BACKENDS = ("numpy", "numba")
_CHILD = np.arange(BRANCH)


def _load_kernels() -> dict[str, Callable[..., Any]] | None:
    """The compiled update and search loops, or None without numba."""
    try:
        from rlpipe.data.buffer.middleware import _sum_tree_kernels as kernels
    except ImportError:
        return None
    return {
        "update": kernels.update,
        "find": kernels.find,
        "stratified": kernels.stratified,
        "update_priorities": kernels.update_priorities,
        "stratified_weights": kernels.stratified_weights,
    }


_KERNELS = _load_kernels()
DEFAULT_BACKEND = "numba" if _KERNELS is not None else "numpy"


def _aligned(n: int, fill: float) -> np.ndarray:
    """``n`` float64s filled with ``fill``, starting on a 64-byte boundary.

    numpy aligns large arrays to 16 bytes only; unaligned, every group of 8 children would
    straddle two cache lines, doubling the lines (the cache misses) a walk touches.
    """
    raw = np.full(n + BRANCH, fill)
    skip = (-raw.ctypes.data % 64) // raw.itemsize
    return raw[skip : skip + n]


def _scalar_pow(base: np.ndarray, exponent: float) -> np.ndarray:
    """``base ** exponent`` element by element with libm's scalar ``pow`` (``powf`` for float32).

    The kernels' powers are libm's; numpy's vectorised power is not on every CPU (AVX-512
    builds use SVML, which differs in the last bit) nor in every numpy version, while its
    scalar power calls libm. So the numpy backend takes 30-40 us more per 256 powers, and
    a seed gives the same run with and without numba.
    """
    e = base.dtype.type(exponent)
    with np.errstate(over="ignore"):  # inf, silently, as in the kernels
        return np.array([b**e for b in base], dtype=base.dtype)


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
        self.depth = 1  # at least one inner level: the root is never a leaf
        while BRANCH**self.depth < self.capacity:
            self.depth += 1
        sizes = [BRANCH**level for level in range(self.depth + 1)]
        starts = [0, BRANCH] + [0] * self.depth  # the root is padded to a whole line
        for level in range(1, self.depth + 1):
            starts[level + 1] = starts[level] + sizes[level]
        self.offsets = np.array(starts[: self.depth + 1], dtype=np.int64)
        self.sums = _aligned(int(self.offsets[-1]) + sizes[-1], 0.0)
        self.mins = _aligned(int(self.offsets[-1]), np.inf) if track_min else None
        self._kernel_mins = self.mins if self.mins is not None else np.zeros(0)  # kernels: empty = untracked

    def _level(self, array: np.ndarray, level: int) -> np.ndarray:
        """The nodes of ``level`` grouped by parent: shape [nodes of level - 1, 8]."""
        start = int(self.offsets[level])
        return array[start : start + BRANCH**level].reshape(-1, BRANCH)

    def _recompute(self, level: int, nodes: np.ndarray | slice) -> None:
        """Recompute the sums (and minima) of ``nodes`` of inner ``level`` from their children."""
        start, count = int(self.offsets[level]), BRANCH**level
        children = self._level(self.sums, level + 1)[nodes]
        self.sums[start : start + count][nodes] = _sum8(children)
        if self.mins is not None:
            if level == self.depth - 1:  # children are leaves: the positive ones count
                low = np.where(children > 0, children, np.inf).min(axis=1)
            else:
                low = self._level(self.mins, level + 1)[nodes].min(axis=1)
            self.mins[start : start + count][nodes] = low

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
        values = np.asarray(values, dtype=np.float64)
        if values.shape != node.shape:
            values = np.ascontiguousarray(np.broadcast_to(values, node.shape))
        if self._kernels is not None:
            self._kernels["update"](self.sums, self._kernel_mins, self.offsets, node, values)
            return
        self.sums[self.offsets[-1] + node] = values
        for level in range(self.depth - 1, -1, -1):
            if BRANCH**level <= len(values):
                self._recompute(level, slice(None))
            else:
                node = node // BRANCH
                self._recompute(level, node)

    def rebuild(self, values: np.ndarray) -> None:
        """Set every leaf at once (e.g. after loading) and recompute all parents."""
        values = np.asarray(values, dtype=np.float64)
        if values.shape != (self.capacity,):
            raise ValueError(f"SumTree.rebuild needs {self.capacity} leaves, got shape {values.shape}")
        self.sums[:] = 0.0
        self.sums[self.offsets[-1] : self.offsets[-1] + self.capacity] = values
        for level in range(self.depth - 1, -1, -1):
            self._recompute(level, slice(None))

    def find(self, targets: np.ndarray) -> np.ndarray:
        """Leaf positions where the running sum of leaves first exceeds each target.

        ``targets`` should lie in ``[0, total)``; a target that rounding pushes past the end
        of a node's children goes to its last non-empty child, so no empty leaf is returned.
        """
        targets = np.asarray(targets, dtype=np.float64).reshape(-1)
        node = np.zeros(len(targets), dtype=np.int64)
        if self._kernels is not None:
            self._kernels["find"](self.sums, self.offsets, targets, node)
            return node
        values = targets.copy()
        rows = np.arange(len(values))
        for level in range(self.depth):
            children = self._level(self.sums, level + 1)[node]
            before = np.cumsum(children, axis=1)
            chosen = np.count_nonzero(before <= values[:, None], axis=1)
            # past the end goes to the last non-empty child (child 0 if none is, as the kernel)
            last_positive = ((children > 0) * _CHILD).max(axis=1)
            chosen = np.minimum(chosen, last_positive)
            values -= before[rows, chosen] - children[rows, chosen]
            node = node * BRANCH + chosen
        return node

    def stratified(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One leaf from each of ``n = len(u)`` equal strata of the total, and the leaf values.

        Stratum ``j`` is searched at ``(j + u[j]) * total / n``; with ``u`` uniform in [0, 1)
        each leaf is found with probability proportional to its value, spread more evenly
        than ``n`` independent draws (Schaul et al., 2016, appendix B.2.1).
        """
        u = np.asarray(u, dtype=np.float64).reshape(-1)
        n = len(u)
        if self._kernels is not None:
            positions, values = np.empty(n, dtype=np.int64), np.empty(n)
            self._kernels["stratified"](self.sums, self.offsets, u, positions, values)
            return positions, values
        total = self.total
        positions = self.find(np.minimum((np.arange(n) + u) * (total / max(n, 1)), np.nextafter(total, 0)))
        return positions, self.leaves(positions)

    def stratified_weights(self, u: np.ndarray, beta: float) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`stratified`'s leaf positions, and importance-sampling weights for them.

        The weight of leaf ``v`` is ``(v / min) ** -beta`` as float32 (``min``: the smallest
        positive leaf; needs ``track_min``). One compiled call with numba.
        """
        low = self.min
        if self._kernels is not None:
            u = np.asarray(u, dtype=np.float64).reshape(-1)
            positions, weights = np.empty(len(u), dtype=np.int64), np.empty(len(u), dtype=np.float32)
            self._kernels["stratified_weights"](self.sums, self.offsets, u, low, beta, positions, weights)
            return positions, weights
        positions, leaf = self.stratified(u)
        return positions, _scalar_pow((leaf / low).astype(np.float32), -beta)

    def update_priorities(
        self, positions: np.ndarray, priorities: np.ndarray, keep: np.ndarray, alpha: float, eps: float
    ) -> float:
        """Set leaves ``positions[keep]`` to ``(priorities[keep] + eps) ** alpha``.

        Returns the largest kept priority (0.0 if none is kept). ValueError, with nothing
        set, if any priority (kept or not) is negative or NaN. One compiled call with numba.
        """
        if self._kernels is not None:
            top = self._kernels["update_priorities"](
                self.sums, self._kernel_mins, self.offsets, positions, keep, priorities, eps, alpha
            )
            if math.isnan(top):
                raise ValueError("priorities must be finite and >= 0")
            return float(top)
        if not priorities.min(initial=0.0) >= 0:  # also rejects NaN
            raise ValueError("priorities must be finite and >= 0")
        if not keep.all():  # the common case, every item kept, needs no copies
            positions, priorities = positions[keep], priorities[keep]
        self.update(positions, _scalar_pow(priorities.astype(np.float64, copy=False) + eps, alpha))
        return float(priorities.max(initial=0.0))
