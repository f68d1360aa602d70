"""FailedStepFilter: placeholders of failed env steps never leave the collector."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from rlpipe.data import DequeBuffer
from rlpipe.data.failed_steps import FailedStepFilter
from rlpipe.data.nstep import NStepAccumulator
from rlpipe.framework import OnlineRLContext
from rlpipe.framework.middleware import data_pusher
from rlpipe.utils.batch import FAILED_STEP


def vector_step(t: int, failed=(False, False), terminated=(False, False)) -> dict[str, np.ndarray]:
    return {
        "obs": np.array([t, 10 + t]),
        "reward": np.ones(2, dtype=np.float32),
        "terminated": np.array(terminated),
        "truncated": np.zeros(2, dtype=bool),
        "env_id": np.arange(2),
        FAILED_STEP: np.array(failed),
    }


def test_output_lags_one_vector_step_and_has_no_failure_column():
    clean = FailedStepFilter()
    assert clean.add(vector_step(0)) is None and clean.held_rows == 2
    out = clean.add(vector_step(1))
    assert out is not None and out["obs"].tolist() == [0, 10] and FAILED_STEP not in out
    assert not out["truncated"].any()


def test_a_failure_drops_its_row_and_truncates_that_envs_step_before():
    clean = FailedStepFilter()
    clean.add(vector_step(0))
    before = clean.add(vector_step(1, failed=(False, True)))
    assert before["truncated"].tolist() == [False, True]  # env 1's step 0 ended its episode
    after = clean.add(vector_step(2))
    assert after["obs"].tolist() == [1]  # env 1's failed step 1 is gone
    assert clean.add(vector_step(3))["obs"].tolist() == [2, 12]


def test_a_step_that_already_ended_its_episode_stays_as_it_was():
    clean = FailedStepFilter()
    clean.add(vector_step(0, terminated=(True, False)))
    out = clean.add(vector_step(1, failed=(True, False)))
    assert out["terminated"].tolist() == [True, False] and not out["truncated"].any()


def test_two_failures_in_a_row_keep_only_real_rows():
    clean = FailedStepFilter()
    clean.add(vector_step(0))
    clean.add(vector_step(1, failed=(True, False)))
    out = clean.add(vector_step(2, failed=(True, False)))
    assert out["obs"].tolist() == [11]  # env 0's placeholder dropped; nothing before it to truncate
    clean.reset()
    assert clean.held_rows == 0 and clean.add(vector_step(3)) is None


def test_raw_vector_env_rows_are_refused_downstream_of_the_collector():
    raw = vector_step(0, failed=(False, True))
    raw["next_obs"] = raw["obs"] + 1
    with pytest.raises(ValueError, match="n-step got rows with an 'env_error' column"):
        NStepAccumulator(3, 0.9).add(raw)
    cfg = SimpleNamespace(policy=SimpleNamespace(collect=SimpleNamespace(unroll_len=1)))
    with pytest.raises(ValueError, match="data_pusher got rows with an 'env_error' column"):
        data_pusher(cfg, DequeBuffer(8))(OnlineRLContext(trajectories=raw))
