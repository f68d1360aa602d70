"""choose: uniform index draws, distinct unless asked otherwise, with and without numba."""

from __future__ import annotations

import numpy as np
import pytest

from rlpipe.data.buffer import sampling


@pytest.fixture(params=["numba", "numpy"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "numpy":
        monkeypatch.setattr(sampling, "_kernels", None)
    elif sampling._kernels is None:
        pytest.skip("numba is not installed")  # the "numpy" case covers this machine
    return request.param


@pytest.mark.parametrize(("population", "size"), [(10_000, 64), (50, 49), (7, 7), (5, 0)])
def test_draws_without_replacement_are_distinct_and_in_range(backend: str, population: int, size: int) -> None:
    rng = np.random.default_rng(0)
    for _ in range(200):
        drawn = sampling.choose(rng, population, size, replace=False)
        assert drawn.dtype == np.int64 and drawn.shape == (size,)
        assert len(np.unique(drawn)) == size and (drawn >= 0).all() and (drawn < population).all()


def test_draws_with_replacement_may_repeat(backend: str) -> None:
    drawn = sampling.choose(np.random.default_rng(0), 3, 300, replace=True)
    assert set(drawn.tolist()) == {0, 1, 2}


@pytest.mark.parametrize("replace", [False, True])
def test_every_index_is_equally_likely(backend: str, replace: bool) -> None:
    """Chi-square over 20 indices, 40,000 draws of 4 (fixed seed): p-value well above 0.001."""
    rng = np.random.default_rng(1)
    counts = np.bincount(
        np.concatenate([sampling.choose(rng, 20, 4, replace) for _ in range(10_000)]), minlength=20
    )
    expected = counts.sum() / 20
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 43.8  # the 0.999 quantile of chi-square with 19 degrees of freedom


def test_the_kernel_reports_a_repeat() -> None:
    if sampling._kernels is None:
        pytest.skip("numba is not installed")
    out = np.empty(3, dtype=np.int64)
    assert not sampling._kernels.scale_to_indices(np.array([0.1, 0.5, 0.11]), 10, True, out)
    assert sampling._kernels.scale_to_indices(np.array([0.1, 0.5, 0.11]), 10, False, out)
    assert out.tolist() == [1, 5, 1]
