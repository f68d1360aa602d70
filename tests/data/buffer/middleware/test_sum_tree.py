"""SumTree: batch update and batch prefix search against plain numpy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlpipe.data.buffer.middleware import SumTree
from rlpipe.data.buffer.middleware.sum_tree import DEFAULT_BACKEND

BACKENDS = ["numpy"] + (["numba"] if DEFAULT_BACKEND == "numba" else [])


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=50, deadline=None)
@given(capacity=st.integers(1, 40), seed=st.integers(0, 1000))
def test_update_and_find_match_cumsum(backend: str, capacity: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    tree = SumTree(capacity, backend=backend)
    values = np.zeros(capacity)
    for _ in range(3):
        pos = rng.integers(0, capacity, rng.integers(1, 2 * capacity + 1))
        new = rng.choice([0.0, 0.5, 1.0, 3.0], len(pos))
        tree.update(pos, new)
        values[pos] = new  # duplicates: last write wins in both
    np.testing.assert_allclose(tree.leaves(), values)
    assert tree.total == pytest.approx(values.sum())
    positive = values[values > 0]
    assert tree.min == (positive.min() if len(positive) else np.inf)
    if values.sum() > 0:
        targets = rng.random(50) * values.sum()
        expected = np.searchsorted(np.cumsum(values), targets, side="right")
        np.testing.assert_array_equal(tree.find(targets), expected)


@pytest.mark.parametrize("backend", BACKENDS)
def test_find_never_returns_an_empty_leaf_at_the_top_edge(backend: str) -> None:
    tree = SumTree(6, backend=backend)
    tree.update(np.arange(6), [0.1, 0.2, 0.3, 0.0, 0.0, 0.0])
    assert tree.find(np.array([np.nextafter(tree.total, 0), tree.total]))[0] == 2
    assert set(tree.find(np.array([tree.total, tree.total * 2])).tolist()) <= {0, 1, 2}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("n_updates", [3, 100])  # few: walks per leaf; many: whole top levels
def test_min_tracks_positive_leaves_through_updates(backend: str, n_updates: int) -> None:
    rng = np.random.default_rng(n_updates)
    tree, values = SumTree(70, backend=backend), np.zeros(70)
    for _ in range(20):
        pos = rng.integers(0, 70, n_updates)
        new = rng.random(n_updates) * (rng.random(n_updates) > 0.3)
        tree.update(pos, new)
        values[pos] = new
        positive = values[values > 0]
        assert tree.min == (positive.min() if len(positive) else np.inf)
        assert tree.total == pytest.approx(values.sum())


@pytest.mark.parametrize("backend", BACKENDS)
def test_min_follows_the_smallest_leaf_rising_vanishing_and_repeated(backend: str) -> None:
    tree = SumTree(600, backend=backend)  # three inner levels
    tree.update(np.arange(600), np.linspace(1.0, 2.0, 600))
    tree.update(np.array([0]), 5.0)  # the smallest leaf rises: the next one is the min
    assert tree.min == pytest.approx(1.0 + 1 / 599)
    tree.update(np.array([1, 2]), 0.0)  # the smallest ones vanish (0 = never sampled)
    assert tree.min == pytest.approx(1.0 + 3 / 599)
    tree.update(np.array([599, 599]), [0.5, 3.0])  # a repeat: the last write counts
    assert tree.min == pytest.approx(1.0 + 3 / 599) and tree.leaves([599])[0] == 3.0
    tree.update(np.array([300, 7]), [0.25, 0.1])  # new smallest leaves, far apart
    assert tree.min == 0.1


@pytest.mark.parametrize("backend", BACKENDS)
def test_stratified_searches_one_target_per_stratum(backend: str) -> None:
    tree = SumTree(1, backend=backend)  # a single leaf still has an inner root above it
    tree.update(np.array([0]), 2.0)
    assert tree.stratified(np.array([0.0, 0.99]))[0].tolist() == [0, 0] and tree.min == 2.0
    rng = np.random.default_rng(1)
    values = rng.random(300) * (rng.random(300) > 0.2)
    tree = SumTree(300, backend=backend)
    tree.update(np.arange(300), values)
    u = rng.random(64)
    positions, leaf = tree.stratified(u)
    targets = np.minimum((np.arange(64) + u) * (tree.total / 64), np.nextafter(tree.total, 0))
    np.testing.assert_array_equal(positions, tree.find(targets))
    np.testing.assert_array_equal(leaf, values[positions])
    assert (leaf > 0).all()
    assert tree.stratified(np.zeros(0))[0].shape == (0,)


def test_rebuild_equals_incremental_updates() -> None:
    values = np.arange(10, dtype=float)
    a, b = SumTree(10), SumTree(10, backend="numpy")
    a.update(np.arange(10), values)
    b.rebuild(values)
    np.testing.assert_array_equal(a.sums, b.sums)
    np.testing.assert_array_equal(a.mins, b.mins)
    with pytest.raises(ValueError, match="needs 10 leaves"):
        b.rebuild(np.zeros(3))
    with pytest.raises(ValueError, match="track_min=False"):
        _ = SumTree(4, track_min=False).min


@pytest.mark.skipif(DEFAULT_BACKEND != "numba", reason="numba not installed")
@pytest.mark.parametrize(("capacity", "batch"), [(1000, 300), (5000, 16)])
def test_backends_agree_bit_for_bit(capacity: int, batch: int) -> None:
    """(5000, 16): many levels updated per leaf, where numba stops recomputing unchanged minima."""
    rng = np.random.default_rng(0)
    a, b = SumTree(capacity, backend="numpy"), SumTree(capacity, backend="numba")
    for _ in range(5):
        pos = rng.integers(0, capacity, batch)
        values = rng.random(batch) * (rng.random(batch) > 0.1)
        a.update(pos, values)
        b.update(pos, values)
    np.testing.assert_array_equal(a.sums, b.sums)
    np.testing.assert_array_equal(a.mins, b.mins)
    targets = rng.random(500) * a.total
    np.testing.assert_array_equal(a.find(targets), b.find(targets))
    u = rng.random(200)
    for got, expected in zip(a.stratified(u), b.stratified(u), strict=True):
        np.testing.assert_array_equal(got, expected)


def test_unknown_backend_is_rejected() -> None:
    with pytest.raises(ValueError, match="backend 'gpu' is not available"):
        SumTree(4, backend="gpu")


@pytest.mark.parametrize("backend", BACKENDS)
def test_levels_start_on_cache_lines(backend: str) -> None:
    tree = SumTree(100_000, backend=backend)
    assert tree.sums.ctypes.data % 64 == 0
    assert tree.mins is not None and tree.mins.ctypes.data % 64 == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_stratified_weights_are_leaf_over_min_to_minus_beta(backend: str) -> None:
    tree = SumTree(50, backend=backend)
    leaves = np.random.default_rng(0).random(50) + 0.1
    tree.update(np.arange(50), leaves)
    u = np.random.default_rng(1).random(32)
    positions, weights = tree.stratified_weights(u, 0.4)
    np.testing.assert_array_equal(positions, tree.stratified(u)[0])
    assert weights.dtype == np.float32
    np.testing.assert_allclose(weights, (leaves[positions] / leaves.min()) ** -0.4, rtol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_update_priorities_sets_kept_leaves_and_returns_their_max(backend: str) -> None:
    tree = SumTree(8, backend=backend)
    keep = np.array([True, False, True])
    top = tree.update_priorities(np.array([1, 2, 3]), np.array([4.0, 9.0, 0.0]), keep, 0.5, 1e-6)
    assert top == 4.0
    np.testing.assert_allclose(tree.leaves(), [0, 2.0, 0, 1e-3, 0, 0, 0, 0], rtol=1e-5)
    assert tree.min == pytest.approx(1e-3)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("bad", [-1.0, np.nan])
def test_update_priorities_rejects_negative_or_nan_and_sets_nothing(backend: str, bad: float) -> None:
    tree = SumTree(8, backend=backend)
    keep = np.array([True, False])  # a rejected priority need not be kept to be rejected
    with pytest.raises(ValueError, match="finite and >= 0"):
        tree.update_priorities(np.array([1, 2]), np.array([3.0, bad]), keep, 0.6, 1e-6)
    assert tree.total == 0
