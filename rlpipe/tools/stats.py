"""Aggregates of runs with 95% bootstrap intervals, as Agarwal et al. (2021) recommend for RL results.

Who does what: scipy computes the interquartile mean (``scipy.stats.trim_mean``) and every
interval of a statistic of scores (``scipy.stats.bootstrap``, percentile method). The bootstrap
is **stratified**: each task's runs (and each group's, for a comparison) are resampled on their
own, which is what ``scipy.stats.bootstrap`` does with several samples. Steps to a threshold
are the exception: a run that never reaches it counts as "not reached" (infinity), which
scipy's interpolated percentiles cannot take, so their resampling is numpy's here, with
percentiles that pick an order statistic instead of interpolating.

With fewer than two runs in a stratum there is no interval (None); with fewer than four runs
the IQM trims nothing and equals the mean (reports say so).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from rlpipe.errors import MissingDependencyError

try:
    from scipy import stats
except ImportError:
    raise MissingDependencyError("rlpipe report needs scipy: pip install 'rlpipe[report]'") from None

CONFIDENCE = 0.95
RESAMPLES = 10_000
"""Bootstrap resamples per interval (rliable uses 2,000 to 50,000; the percentile ends move by well
under 1% of the interval between 10,000 and 50,000 on ten runs)."""
IQM_TRIM = 0.25


@dataclass(frozen=True)
class Estimate:
    """A point estimate and its 95% interval (None: too few runs for one)."""

    value: float
    low: float | None
    high: float | None

    def as_dict(self) -> dict[str, float | None]:
        return {"value": self.value, "low": self.low, "high": self.high}


def iqm(scores: np.ndarray, axis: int = -1) -> np.ndarray:
    """The interquartile mean: the mean of the middle 50% of ``scores`` along ``axis``."""
    return np.asarray(stats.trim_mean(scores, IQM_TRIM, axis=axis))


def mean(scores: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(scores, axis=axis)


def median(scores: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.median(scores, axis=axis)


AGGREGATES: dict[str, Callable[..., np.ndarray]] = {"mean": mean, "median": median, "IQM": iqm}
"""The aggregates a report gives, by their name in its tables."""


def pooled(aggregate: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    """``aggregate`` of the scores of several strata pooled along the last axis (rliable's way for
    the IQM over games x seeds)."""

    def statistic(*strata: np.ndarray, axis: int = -1) -> np.ndarray:
        return aggregate(np.concatenate(strata, axis=axis), axis=axis)

    return statistic


def bootstrap_estimate(strata: Sequence[np.ndarray], statistic: Callable[..., np.ndarray], seed: int = 0) -> Estimate:
    """``statistic(*strata)`` with its 95% stratified percentile-bootstrap interval (scipy); no
    interval when a stratum has fewer than two values or all values are equal."""
    strata = [np.asarray(s, dtype=np.float64) for s in strata]
    value = float(statistic(*strata, axis=-1))
    if min(len(s) for s in strata) < 2 or all(np.ptp(s) == 0 for s in strata):
        return Estimate(value, None, None) if min(len(s) for s in strata) < 2 else Estimate(value, value, value)
    result = stats.bootstrap(tuple(strata), statistic, n_resamples=RESAMPLES, confidence_level=CONFIDENCE,
                             method="percentile", vectorized=True, axis=-1, rng=np.random.default_rng(seed))
    return Estimate(value, float(result.confidence_interval.low), float(result.confidence_interval.high))


def probability_of_improvement(x: Sequence[np.ndarray], y: Sequence[np.ndarray], seed: int = 0) -> Estimate:
    """P(X > Y): the chance that a run of X scores above a run of Y on the same task (ties count one
    half; the Mann-Whitney U statistic over the pairs), averaged over tasks; ``x[i]`` and ``y[i]``
    are one task's runs. Its interval resamples each group's runs of each task on their own."""
    if len(x) != len(y) or not x:
        raise ValueError("probability_of_improvement needs the same tasks, at least one, for both groups")
    tasks = len(x)

    def statistic(*samples: np.ndarray, axis: int = -1) -> np.ndarray:
        total = 0.0
        for xs, ys in zip(samples[:tasks], samples[tasks:], strict=True):
            greater = (xs[..., :, None] > ys[..., None, :]).mean(axis=(-2, -1))
            ties = (xs[..., :, None] == ys[..., None, :]).mean(axis=(-2, -1))
            total = total + greater + 0.5 * ties
        return np.asarray(total / tasks)

    return bootstrap_estimate([*x, *y], statistic, seed)


def censored_median(steps: np.ndarray, seed: int = 0) -> Estimate:
    """The median of ``steps`` (``inf`` for a run that never got there), read as the first step by which
    at least half the runs got there (the lower middle value, as a survival curve's median), with a
    95% percentile-bootstrap interval (numpy: interpolating between a step and infinity is undefined,
    so each percentile is an order statistic). An ``inf`` end means the interval reaches "not reached"."""
    steps = np.asarray(steps, dtype=np.float64)
    value = float(np.quantile(steps, 0.5, method="inverted_cdf"))
    if len(steps) < 2:
        return Estimate(value, None, None)
    rng = np.random.default_rng(seed)
    resampled = steps[rng.integers(0, len(steps), size=(RESAMPLES, len(steps)))]
    medians = np.quantile(resampled, 0.5, axis=1, method="inverted_cdf")
    tail = (1 - CONFIDENCE) / 2
    low, high = np.quantile(medians, [tail, 1 - tail], method="inverted_cdf")
    return Estimate(value, float(low), float(high))


def band(values: np.ndarray, aggregate: Callable[..., np.ndarray] = mean, seed: int = 0) -> tuple[np.ndarray, ...]:
    """Per column of ``values`` (``[runs, points]``): the aggregate over runs and its 95% bootstrap
    interval, for a curve with a band; with one run the band is the curve itself."""
    centre = aggregate(values, axis=0)
    if values.shape[0] < 2:
        return centre, centre, centre
    result = stats.bootstrap((values,), aggregate, n_resamples=min(RESAMPLES, 2_000), confidence_level=CONFIDENCE,
                             method="percentile", vectorized=True, axis=0, rng=np.random.default_rng(seed))
    low, high = result.confidence_interval
    return centre, np.where(np.isnan(low), centre, low), np.where(np.isnan(high), centre, high)
