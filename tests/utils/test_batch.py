"""Batch helpers: failed steps end their episode at the step before."""

from __future__ import annotations

import numpy as np

from rlpipe.utils.batch import FAILED_STEP, end_episodes_at_failed_steps, step_before


def steps(env_id, terminated, truncated, failed) -> dict[str, np.ndarray]:
    n = len(env_id)
    return {
        "env_id": np.asarray(env_id),
        "reward": np.arange(n, dtype=np.float32),
        "terminated": np.asarray(terminated, dtype=bool),
        "truncated": np.asarray(truncated, dtype=bool),
        FAILED_STEP: np.asarray(failed),
    }


def test_a_failed_step_is_dropped_and_the_step_before_of_its_env_truncated() -> None:
    batch = steps([0, 1, 0, 1, 0], [0] * 5, [0, 0, 0, 1, 0], [0, 0, 0, 1, 0])
    out = end_episodes_at_failed_steps(batch)
    assert FAILED_STEP not in out and out["reward"].tolist() == [0, 1, 2, 4]
    assert out["truncated"].tolist() == [False, True, False, False]  # env 1's step before the failure
    assert not batch["truncated"][:3].any()  # the input is left as it was


def test_a_step_before_that_already_ended_an_episode_or_failed_is_left_alone() -> None:
    # env 0: terminated at row 0, then its new episode fails at once (row 1), then again (row 2)
    batch = steps([0, 0, 0, 0], [1, 0, 0, 0], [0, 1, 1, 0], [0, 1, 1, 0])
    out = end_episodes_at_failed_steps(batch)
    assert out["reward"].tolist() == [0, 3]
    assert out["terminated"].tolist() == [True, False] and out["truncated"].tolist() == [False, False]


def test_without_failures_only_the_column_goes() -> None:
    assert end_episodes_at_failed_steps(steps([0, 1], [0, 0], [0, 0], [0, 0])).keys() == {
        "env_id", "reward", "terminated", "truncated"
    }
    only_failed = steps([0], [0], [1], [1])
    del only_failed["env_id"]  # without env_id: one environment
    assert len(end_episodes_at_failed_steps(only_failed)["reward"]) == 0


def test_step_before_is_the_previous_row_of_the_same_env() -> None:
    assert step_before(np.array([0, 1, 0, 2, 1, 0])).tolist() == [-1, -1, 0, -1, 1, 2]
