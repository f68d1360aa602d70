"""Batch helpers: failed steps end their episode at the step before."""

from __future__ import annotations

import numpy as np

from rlpipe.utils.batch import FAILED_STEP, end_episodes_at_failed_steps


def test_a_failed_step_is_dropped_and_the_step_before_of_its_env_truncated() -> None:
    batch = {
        "env_id": np.array([0, 1, 0, 1, 0]),
        "reward": np.array([1.0, 2.0, 3.0, 0.0, 5.0]),
        "truncated": np.zeros(5, dtype=bool),
        FAILED_STEP: np.array([False, False, False, True, False]),
    }
    out = end_episodes_at_failed_steps(batch)
    assert FAILED_STEP not in out and out["reward"].tolist() == [1.0, 2.0, 3.0, 5.0]
    assert out["truncated"].tolist() == [False, True, False, False]  # env 1's step before the failure
    assert not batch["truncated"].any()  # the input is left as it was


def test_without_failures_only_the_column_goes() -> None:
    batch = {"reward": np.ones(2), "truncated": np.zeros(2, dtype=bool), FAILED_STEP: np.zeros(2, dtype=bool)}
    assert end_episodes_at_failed_steps(batch).keys() == {"reward", "truncated"}
    only_failed = {"reward": np.zeros(1), "truncated": np.ones(1, dtype=bool), FAILED_STEP: np.ones(1, dtype=bool)}
    assert len(end_episodes_at_failed_steps(only_failed)["reward"]) == 0  # no env_id: one env
