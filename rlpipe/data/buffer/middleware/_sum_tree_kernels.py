"""Compiled (numba) loops of :class:`~rlpipe.data.buffer.middleware.sum_tree.SumTree`.

Importing this module needs numba; ``sum_tree`` falls back to its numpy code without it.
The arithmetic matches the numpy backend's bit for bit (the tests compare both), so a seed
gives one run with and without numba: the same sums, minima and search, and the powers of
IS weights and priorities with libm's scalar ``pow`` / ``powf`` (which the numpy backend
calls element by element: numpy's vectorised power may differ in the last bit). The layout
is the one ``SumTree`` documents: ``offsets[level]`` starts each level in ``sums``; ``mins``
holds the inner levels only (empty when minima are not tracked).
"""

import numba
import numpy as np


@numba.njit(cache=True, inline="always")
def recompute_sum(sums, offsets, level, node):
    c = offsets[level + 1] + 8 * node
    # the same association as _sum8, so both backends agree bit for bit
    sums[offsets[level] + node] = ((sums[c] + sums[c + 1]) + (sums[c + 2] + sums[c + 3])) + (
        (sums[c + 4] + sums[c + 5]) + (sums[c + 6] + sums[c + 7])
    )


@numba.njit(cache=True, inline="always")
def recompute_min(sums, mins, offsets, level, node, leaf_children):
    # Selects, not min(): numba's NaN-aware min() branches. (Measured: a branch on
    # "track the min?" inside this helper, rather than at its call site, made update 2.5x slower.)
    # Returns whether the node's min changed (if not, its ancestors' need no recompute).
    c = offsets[level + 1] + 8 * node
    low = np.inf
    if leaf_children:  # the positive leaves count
        for k in range(8):
            value = sums[c + k]
            value = value if value > 0 else np.inf
            low = value if value < low else low
    else:
        for k in range(8):
            value = mins[c + k]
            low = value if value < low else low
    changed = mins[offsets[level] + node] != low
    mins[offsets[level] + node] = low
    return changed


@numba.njit(cache=True)
def update_min(sums, mins, offsets, position, old, new):
    # Minima after leaf ``position`` went from ``old`` to ``new`` (already in ``sums``). Most
    # updates change no minimum, and two compares show it: only a new value below the
    # parent's minimum, or the old minimum leaf itself changing, needs more.
    depth = offsets.shape[0] - 1
    level = depth - 1
    node = position // 8
    low = mins[offsets[level] + node]
    if 0 < new < low:  # the new leaf is the smallest below each ancestor until one has a smaller
        while level >= 0 and new < mins[offsets[level] + node]:
            mins[offsets[level] + node] = new
            level -= 1
            node //= 8
    elif old == low and new != old:  # the smallest leaf changed: recompute while minima change
        leaf_children = True
        while level >= 0 and recompute_min(sums, mins, offsets, level, node, leaf_children):
            leaf_children = False
            level -= 1
            node //= 8


@numba.njit(cache=True)
def update(sums, mins, offsets, positions, values):
    depth = offsets.shape[0] - 1
    n = positions.shape[0]
    track_min = mins.shape[0] > 0
    for j in range(n):  # leaves and minima one update after another: a repeated position is fine
        leaf = offsets[depth] + positions[j]
        old = sums[leaf]
        sums[leaf] = values[j]
        if track_min:
            update_min(sums, mins, offsets, positions[j], old, values[j])
    nodes = positions.copy()
    for level in range(depth - 1, -1, -1):
        if 8**level <= n:  # this level and those above: recompute every node once
            for node in range(8**level):
                recompute_sum(sums, offsets, level, node)
        else:
            for j in range(n):
                nodes[j] //= 8
                recompute_sum(sums, offsets, level, nodes[j])


@numba.njit(cache=True)
def find(sums, offsets, targets, out):
    # Per level, a first pass only loads each target's first child: a loop tight enough to
    # have many cache misses in flight at once, so the second pass finds its lines cached.
    # Branch-free child choice: which of 8 children a random target falls in is
    # unpredictable, so a compare-and-branch loop mispredicts about once per level;
    # counting the running sums <= target costs no branch. The arithmetic is the numpy
    # backend's (running sums left to right, subtract before - child), bit for bit.
    depth = offsets.shape[0] - 1
    values = targets.copy()
    first = np.empty(values.shape[0])
    before = np.empty(8)
    out[:] = 0
    for level in range(depth):
        first_child = offsets[level + 1]
        for j in range(values.shape[0]):
            first[j] = sums[first_child + 8 * out[j]]
        for j in range(values.shape[0]):
            child = first_child + 8 * out[j]
            value = values[j]
            running = first[j]
            before[0] = running
            chosen = int(running <= value)
            for c in range(1, 8):
                running += sums[child + c]
                before[c] = running
                chosen += running <= value
            if chosen == 8:  # rounding pushed the target past the end: take the last non-empty
                chosen = 7
                while chosen > 0 and sums[child + chosen] <= 0:
                    chosen -= 1
            values[j] = value - (before[chosen] - sums[child + chosen])
            out[j] = 8 * out[j] + chosen


@numba.njit(cache=True)
def stratified(sums, offsets, offsets_in_strata, out, leaf_values):
    # the numpy backend's arithmetic: target j = (j + u_j) * (total / n), kept below total
    n = offsets_in_strata.shape[0]
    total = sums[0]
    top = np.nextafter(total, 0.0)
    targets = np.empty(n)
    for j in range(n):
        targets[j] = min((j + offsets_in_strata[j]) * (total / n), top)
    find(sums, offsets, targets, out)
    first_leaf = offsets[offsets.shape[0] - 1]
    for j in range(n):
        leaf_values[j] = sums[first_leaf + out[j]]


@numba.njit(cache=True)
def update_priorities(sums, mins, offsets, positions, keep, priorities, eps, alpha):
    # Returns the largest kept priority (0.0 if none is kept), or NaN, having set nothing,
    # when any priority is negative or NaN.
    n = priorities.shape[0]
    for j in range(n):
        if not priorities[j] >= 0:
            return np.nan
    kept_positions = np.empty(n, dtype=np.int64)
    kept_values = np.empty(n)
    count = 0
    top = 0.0
    for j in range(n):
        if keep[j]:
            kept_positions[count] = positions[j]
            kept_values[count] = (priorities[j] + eps) ** alpha
            top = max(top, priorities[j])
            count += 1
    if count:
        update(sums, mins, offsets, kept_positions[:count], kept_values[:count])
    return top


@numba.njit(cache=True)
def stratified_weights(sums, offsets, offsets_in_strata, low, beta, out, weights):
    # stratified, then (leaf / low)^-beta in float32 (powf costs half of pow; the weights
    # are float32 anyway)
    leaf_values = np.empty(out.shape[0])
    stratified(sums, offsets, offsets_in_strata, out, leaf_values)
    exponent = np.float32(-beta)
    for j in range(out.shape[0]):
        weights[j] = np.float32(leaf_values[j] / low) ** exponent
