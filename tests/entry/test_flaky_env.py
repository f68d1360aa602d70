"""A flaky environment (a step raises with probability 0.01) trains to the end: failed steps are
dropped and counted, evaluations leave out the episodes they cut, and the run never stops."""
from __future__ import annotations

from typing import ClassVar

import gymnasium as gym
import numpy as np

import rlpipe
from rlpipe.utils.metrics import read_metrics

FLAKY_ID = "rlpipe-test/FlakyCartPole-v0"


class FlakyCartPole(gym.Wrapper):
    """CartPole whose ``step`` raises with probability 0.01 (a seeded stream per instance)."""

    raised: ClassVar[int] = 0
    made: ClassVar[int] = 0

    def __init__(self) -> None:
        super().__init__(gym.make("CartPole-v1"))
        self._rng = np.random.default_rng(FlakyCartPole.made)
        FlakyCartPole.made += 1

    def step(self, action):
        if self._rng.random() < 0.01:
            FlakyCartPole.raised += 1
            raise ConnectionError("simulator connection lost")
        return self.env.step(action)


if FLAKY_ID not in gym.registry:
    gym.register(FLAKY_ID, entry_point=FlakyCartPole)


def test_a_flaky_env_trains_to_the_end_with_every_failure_counted(tmp_path):
    raised_before = FlakyCartPole.raised
    summary = rlpipe.train("cartpole-dqn", run_dir=tmp_path / "run", overrides=[
        f"env.env_id={FLAKY_ID}", "run.max_env_step=10000", "run.progress=false", "env.stop_value=1000",
        "policy.eval.evaluator.eval_freq=500", "env.n_evaluator_episode=5",
    ]).summary
    assert summary.env_step >= 10000 and summary.stopped_by is None
    records = read_metrics(tmp_path / "run")
    failed = max(r["train_failed_steps"] for r in records if "train_failed_steps" in r)
    raised = FlakyCartPole.raised - raised_before  # the collector's and the evaluator's envs together
    assert 50 <= failed <= raised  # about 1% of 10,000 collector steps
    assert sum(r["kind"] == "eval" for r in records) >= 3
