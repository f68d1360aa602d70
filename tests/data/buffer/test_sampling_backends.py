"""The numba and numpy backends agree bit for bit: a seed gives one run with or without numba.

Each test draws or computes once per backend from the same Generator state and compares the
results (and the state left behind) exactly. numba is an optional extra, so without it
there is nothing to compare against.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

pytest.importorskip("numba")

from rlpipe.data.buffer import sampling
from rlpipe.data.buffer.middleware.sum_tree import SumTree
from rlpipe.data.buffer.storage import RingStorage


def draw_both(
    monkeypatch: pytest.MonkeyPatch, seed: int, draw: Callable[[np.random.Generator], Any]
) -> tuple[list[Any], list[float]]:
    """``draw(rng)`` with the kernels, then with numpy, each from ``default_rng(seed)``.

    Returns both results and, per backend, the next ``rng.random()``: equal when both left
    the generator in the same state.
    """
    results, after = [], []
    for kernels in (sampling._kernels, None):
        monkeypatch.setattr(sampling, "_kernels", kernels)
        rng = np.random.default_rng(seed)
        results.append(draw(rng))
        after.append(rng.random())
    return results, after


@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize(
    ("population", "size"),
    [
        (7, 3),  # small: without replacement, about 1 in 3 draws repeats and is drawn again
        (300, 24),  # near the redraw limit (24 * 23 <= 600): redraws are common
        (10_000, 64),
        (1_000_000, 256),
        (2**40 + 3, 256),  # floor(u * population) far above 2**32
        (5, 0),
        (1, 1),
    ],
)
def test_choose_draws_the_same_indices(
    monkeypatch: pytest.MonkeyPatch, population: int, size: int, replace: bool
) -> None:
    for seed in range(20):
        (numba_draws, numpy_draws), after = draw_both(
            monkeypatch, seed, lambda rng: [sampling.choose(rng, population, size, replace) for _ in range(20)]
        )
        for a, b in zip(numba_draws, numpy_draws, strict=True):
            assert a.dtype == b.dtype == np.int64
            np.testing.assert_array_equal(a, b)
        assert after[0] == after[1]


@pytest.mark.parametrize(("population", "size"), [(50, 49), (7, 7), (20, 10)])
def test_choose_falls_back_to_generator_choice_alike(
    monkeypatch: pytest.MonkeyPatch, population: int, size: int
) -> None:
    """Distinct draws would be rare: both backends take ``Generator.choice``."""
    (a, b), after = draw_both(monkeypatch, 3, lambda rng: sampling.choose(rng, population, size, replace=False))
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, np.random.default_rng(3).choice(population, size, replace=False))
    assert after[0] == after[1]


@pytest.mark.parametrize("replace", [False, True])
def test_choose_from_an_empty_population_raises_alike(monkeypatch: pytest.MonkeyPatch, replace: bool) -> None:
    for kernels in (sampling._kernels, None):
        monkeypatch.setattr(sampling, "_kernels", kernels)
        with pytest.raises(ValueError):
            sampling.choose(np.random.default_rng(0), 0, 1, replace)


def test_scale_to_indices_matches_the_kernel_at_the_edges() -> None:
    """u just below 1, at 0 and at halves, over populations up to 2**62 (which float64 rounds)."""
    below_one = np.nextafter(1.0, 0.0)
    u = np.array([0.0, 2.0**-53, 0.5, np.nextafter(0.5, 0.0), below_one, np.nextafter(below_one, 0.0)])
    populations = [1, 2, 3, 7, 1000, 2**31 - 1, 2**53 - 1, 2**53 + 1, 3 * 2**52 + 1, 2**62 + 12345]
    for population in populations:
        expected = np.empty(len(u), dtype=np.int64)
        assert sampling._kernels.scale_to_indices(u, population, False, expected)
        got = sampling.scale_to_indices(u, population)
        np.testing.assert_array_equal(got, expected)
        assert got.max() < population


def trees_after_the_same_updates(capacity: int, seed: int) -> tuple[SumTree, SumTree, np.random.Generator]:
    """A numpy and a numba tree after identical priority updates, and the generator that made them."""
    rng = np.random.default_rng(seed)
    trees = SumTree(capacity, backend="numpy"), SumTree(capacity, backend="numba")
    for _ in range(10):
        n = int(rng.integers(1, 300))
        positions = rng.integers(0, capacity, n)
        # values over 12 decades and some zeros; float32 as well (the kernel widens p + eps)
        priorities = rng.random(n) * 10.0 ** rng.uniform(-8, 4, n) * (rng.random(n) > 0.05)
        if rng.random() < 0.3:
            priorities = priorities.astype(np.float32)
        keep = rng.random(n) > 0.1
        alpha = float(rng.choice([0.0, 0.6, 1.0, 1.7, rng.random()]))
        tops = [tree.update_priorities(positions, priorities, keep, alpha, 1e-6) for tree in trees]
        assert tops[0] == tops[1]
    return trees[0], trees[1], rng


@pytest.mark.parametrize(("capacity", "seed"), [(1, 0), (70, 1), (1000, 2), (40_000, 3)])
def test_sum_tree_priorities_and_weights_agree(capacity: int, seed: int) -> None:
    on_numpy, on_numba, rng = trees_after_the_same_updates(capacity, seed)
    np.testing.assert_array_equal(on_numpy.sums, on_numba.sums)
    np.testing.assert_array_equal(on_numpy.mins, on_numba.mins)
    for beta in [0.4, float(rng.random()), 1.0]:
        u = rng.random(int(rng.integers(1, 257)))
        (p0, w0), (p1, w1) = on_numpy.stratified_weights(u, beta), on_numba.stratified_weights(u, beta)
        np.testing.assert_array_equal(p0, p1)
        assert w0.dtype == w1.dtype == np.float32
        np.testing.assert_array_equal(w0, w1)


def test_sum_tree_search_of_an_empty_tree_agrees() -> None:
    """A tree of zeros has no non-empty child to fall back to: both take child 0."""
    trees = SumTree(100, backend="numpy"), SumTree(100, backend="numba")
    targets = np.array([0.0, 0.0])
    np.testing.assert_array_equal(trees[0].find(targets), trees[1].find(targets))
    np.testing.assert_array_equal(trees[0].stratified(np.array([0.5]))[0], trees[1].stratified(np.array([0.5]))[0])


def test_storage_locate_agrees() -> None:
    rng = np.random.default_rng(0)
    rings = RingStorage(50, backend="numpy"), RingStorage(50, backend="numba")
    for _ in range(20):
        n = int(rng.integers(1, 40))
        for ring in rings:
            ring.alloc(n)
        doomed = rng.integers(0, rings[0].next_id, 5)
        for ring in rings:
            located = ring.locate(doomed)
            ring.remove(located.slots[located.exists])
        queries = rng.integers(-60, rings[0].next_id + 60, 200)
        (s0, e0, f0), (s1, e1, f1) = rings[0].locate(queries), rings[1].locate(queries)
        np.testing.assert_array_equal(s0, s1)
        np.testing.assert_array_equal(e0, e1)
        assert f0 == f1


WITHOUT_NUMBA = """
import json, sys
sys.modules["numba"] = None  # importing numba now raises ImportError, as when it is not installed
import numpy as np
from rlpipe.data.buffer import sampling
from rlpipe.data.buffer.middleware.sum_tree import DEFAULT_BACKEND
assert sampling._kernels is None and DEFAULT_BACKEND == "numpy"
rng = np.random.default_rng(11)
print(json.dumps([sampling.choose(rng, 1000, 32, replace).tolist() for replace in (False, True)]))
"""


def test_without_numba_installed_the_draws_are_the_same() -> None:
    """The import fallback itself: a process where numba cannot be imported draws the same."""
    done = subprocess.run([sys.executable, "-c", WITHOUT_NUMBA], capture_output=True, text=True, check=True)
    rng = np.random.default_rng(11)
    assert json.loads(done.stdout) == [sampling.choose(rng, 1000, 32, replace).tolist() for replace in (False, True)]
