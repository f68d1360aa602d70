"""Aggregates and bootstrap intervals: the IQM's trimming, stratified resampling, P(X > Y), censored medians."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as scipy_stats

from rlpipe.tools import stats


def test_the_iqm_averages_the_middle_half_and_trims_nothing_below_four_runs():
    assert float(stats.iqm(np.array([100.0, 1, 2, 3, 4, 5, 6, -100]))) == pytest.approx(3.5)  # mean of 2, 3, 4, 5
    assert float(stats.iqm(np.array([1.0, 2, 30]))) == pytest.approx(11.0)  # three runs: the mean


def test_the_interval_of_a_mean_has_the_width_normal_theory_gives():
    scores = np.random.default_rng(1).normal(0.0, 1.0, size=400)
    estimate = stats.bootstrap_estimate([scores], stats.mean)
    half_width = 1.96 * scores.std(ddof=1) / np.sqrt(len(scores))
    assert estimate.value == pytest.approx(scores.mean())
    assert estimate.low < estimate.value < estimate.high
    assert (estimate.high - estimate.low) / 2 == pytest.approx(half_width, rel=0.1)


def test_strata_are_resampled_on_their_own():
    # Each task's runs agree, so resampling within tasks cannot change the pooled mean; resampling the
    # pooled runs (an unstratified bootstrap) would give an interval of about +-0.5 here.
    strata = [np.zeros(5), np.ones(5)]
    estimate = stats.bootstrap_estimate(strata, stats.pooled(stats.mean))
    assert (estimate.value, estimate.low, estimate.high) == (0.5, 0.5, 0.5)
    spread = stats.bootstrap_estimate([np.array([0.0, 0.0, 0.0, 1.0, 1.0, 2.0]), np.ones(5)], stats.pooled(stats.mean))
    assert spread.low < spread.value < spread.high


def test_one_run_gives_no_interval():
    assert stats.bootstrap_estimate([np.array([3.0])], stats.mean) == stats.Estimate(3.0, None, None)


def test_probability_of_improvement_counts_ties_as_half_as_mann_whitney_does():
    x, y = np.array([1.0, 2.0, 3.0]), np.array([2.0, 2.0])
    # x=1 beats none, x=2 ties both (1 in all), x=3 beats both: (0 + 1 + 2) / 6
    estimate = stats.probability_of_improvement([x], [y])
    assert estimate.value == pytest.approx(0.5)
    assert estimate.value == pytest.approx(scipy_stats.mannwhitneyu(x, y).statistic / 6)
    assert 0.0 <= estimate.low <= estimate.value <= estimate.high <= 1.0


def test_probability_of_improvement_averages_tasks():
    always, never = np.array([5.0, 6.0]), np.array([0.0, 1.0])
    assert stats.probability_of_improvement([always, never], [never, always]).value == pytest.approx(0.5)
    with pytest.raises(ValueError, match="same tasks"):
        stats.probability_of_improvement([always], [never, always])


def test_a_censored_median_is_not_reached_once_half_the_runs_never_get_there():
    assert stats.censored_median(np.array([10.0, 20.0, 30.0, np.inf, np.inf])).value == 30.0
    estimate = stats.censored_median(np.array([10.0, np.inf, np.inf]))
    assert estimate.value == np.inf and estimate.high == np.inf and estimate.low == 10.0


def test_a_band_brackets_the_mean_curve():
    values = np.random.default_rng(0).normal(size=(6, 4)) + np.arange(4)
    centre, low, high = stats.band(values)
    np.testing.assert_allclose(centre, values.mean(axis=0))
    assert np.all(low <= centre) and np.all(centre <= high) and np.all(high - low > 0)
