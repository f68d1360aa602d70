"""Learning tests of the distributional DQNs (as tests/learning/test_learning.py: fixed seeds,
small budgets, asserted returns; budgets leave a margin over the slowest of seeds 0-4 under
``ATEN_CPU_CAPABILITY=avx2`` and ``=default``)."""
from __future__ import annotations

import pytest

from .test_learning import run

pytestmark = pytest.mark.slow


def test_c51_balances_cartpole(tmp_path):
    # 195 was first reached at 576-1,536 env steps over seeds 0-4 and both kernel sets
    # (seed 0: 1,536 under both): 10,000 leave a wide margin
    summary = run(tmp_path, "cartpole-c51", ["seed=0", "env.stop_value=195", "run.max_env_step=10000"])
    assert summary.solved, summary
    assert summary.best_eval_return >= 195


def test_qrdqn_balances_cartpole(tmp_path):
    # 195 was first reached at 1,056-1,536 env steps over seeds 0-4 and both kernel sets
    # (seed 0: 1,536 under both): 10,000 leave a wide margin
    summary = run(tmp_path, "cartpole-qrdqn", ["seed=0", "env.stop_value=195", "run.max_env_step=10000"])
    assert summary.solved, summary
    assert summary.best_eval_return >= 195
