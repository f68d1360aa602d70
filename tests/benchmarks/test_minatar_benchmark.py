"""``benchmarks/minatar.py``: SB3's runs enter ``rlpipe report`` as runs known by their final figure alone.

Stable-baselines3 is not installed for the tests, so its training does not run here; what its runs are
written as does, from a row of the figures the script measures."""

from __future__ import annotations

import json

import pytest

from rlpipe.tools.results import RunResult
from tests.benchmark_scripts import BENCHMARKS, benchmark_module, script_module

pytest.importorskip("minatar")
benchmark_module("peers")  # the script imports its sibling by that name
# not registered as "minatar": that name is the MinAtar package's
minatar_benchmark = script_module(BENCHMARKS / "minatar.py", "minatar_benchmark")


def test_sb3_runs_have_their_final_figure_and_wall_time_and_no_curve():
    row = {"seed": 2, "rlpipe_wall_s": None, "rlpipe_return": None, "sb3_wall_s": 3010.5, "sb3_return": 10.25}
    (result,) = minatar_benchmark.sb3_results("breakout", 500_000, 100, [row])
    assert (result.group, result.task, result.seed, result.library) == ("sb3-dqn", "MinAtar/Breakout-v1", 2,
                                                                        "stable-baselines3")
    assert (result.final, result.final_eval_episodes, result.wall_time_s) == (10.25, 100, [3010.5])
    # it did not evaluate while training: its one figure must not pass for a best evaluation or a curve
    assert not result.curve and result.best is None and result.first_reaching(5.0) is None
    assert result.settings["flush_denormal"] is False and result.settings["precision"] == "fp32"
    # the code that ran: SB3's version (not installed for the tests)
    assert result.source == "stable-baselines3 not installed (benchmarks/minatar.py)"
    assert RunResult.from_dict(json.loads(result.to_json()), "sb3.jsonl") == result  # a valid record
