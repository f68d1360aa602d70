"""Uniform index draws for buffer sampling."""

from __future__ import annotations

import numpy as np

try:
    from rlpipe.data.buffer import _storage_kernels as _kernels
except ImportError:
    _kernels = None  # type: ignore[assignment]


def choose(rng: np.random.Generator, population: int, size: int, replace: bool) -> np.ndarray:
    """``size`` int64s drawn uniformly from ``range(population)``; all distinct unless ``replace``.

    ``floor(u * population)`` of ``rng.random(size)`` (bias below ``population / 2**53``),
    redrawn whole until distinct when that is asked and likely (``size * (size - 1) <= 2 *
    population``: at least about 1 in e draws); ``Generator.choice`` when distinct draws
    would be rare. With and without numba the same algorithm, so the same ``rng`` state
    gives the same indices and leaves the same state: a seed gives one run either way.

    numba only makes it faster: in a training loop, right after a gradient step, it cost
    15 us where ``Generator.choice`` cost 38 us and ``Generator.integers`` 30 us (the first
    call of those after torch's work is slow); 1.2 us where they cost 5 us and 3 us otherwise.
    """
    if not replace and size * (size - 1) > 2 * population:
        return rng.choice(population, size, replace=False)
    if population < 1 and size:
        raise ValueError(f"cannot draw {size} indices from an empty population")
    if _kernels is not None:
        out = np.empty(size, dtype=np.int64)
        while not _kernels.scale_to_indices(rng.random(size), population, not replace, out):
            pass
        return out
    while True:
        out = scale_to_indices(rng.random(size), population)
        if replace or _distinct(out):
            return out


def scale_to_indices(u: np.ndarray, population: int) -> np.ndarray:
    """``floor(u * population)`` for ``u`` in [0, 1), at most ``population - 1``: the kernel's arithmetic.

    The cap is the kernel's guard: rounded to float64, ``u * population`` stays below
    ``population`` for every ``u < 1`` (the tests try the largest), so it never binds.
    """
    u = u * population  # float64 times an int converted to float64, as in the kernel
    out = u.astype(np.int64)  # truncation = floor for u >= 0
    return np.minimum(out, population - 1, out=out)


def _distinct(indices: np.ndarray) -> bool:
    """Whether no index repeats."""
    ordered = np.sort(indices)
    return not np.any(ordered[1:] == ordered[:-1])
