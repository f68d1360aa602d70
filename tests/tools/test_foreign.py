"""Stable-Baselines3 runs as run results: its EvalCallback's evaluations.npz and its Monitor's monitor.csv."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rlpipe.cli.main import main
from rlpipe.tools.foreign import result_of_sb3
from rlpipe.tools.results import ResultError, read_results


def sb3_log(path: Path, successes: bool = False, monitor: bool = True) -> Path:
    """The files SB3 writes: ``np.savez(log_path/evaluations, timesteps=, results=, ep_lengths=[, successes=])``
    and ``Monitor``'s CSV after a JSON comment line."""
    path.mkdir(parents=True, exist_ok=True)
    extra = {"successes": np.array([[0, 0], [1, 0], [1, 1]])} if successes else {}
    np.savez(path / "evaluations", timesteps=np.array([100, 200, 300]),
             results=np.array([[1.0, 3.0], [10.0, 20.0], [30.0, 50.0]]), ep_lengths=np.full((3, 2), 9), **extra)
    if monitor:
        (path / "monitor.csv").write_text('#{"t_start": 0.0, "env_id": "x"}\nr,l,t\n'
                                          + "".join(f"1.0,80,{0.5 * (i + 1)}\n" for i in range(5)))
    return path


def test_evaluations_become_a_curve_with_wall_times_from_the_monitor(tmp_path):
    result = result_of_sb3(sb3_log(tmp_path / "log"), "sb3-dqn", "CartPole-v1", 2, "dqn")
    assert (result.group, result.task, result.seed) == ("sb3-dqn", "CartPole-v1", 2)
    assert result.library == "stable-baselines3" and result.settings == {"algorithm": "dqn"}
    assert result.env_step == [100, 200, 300] and result.value == [2.0, 15.0, 40.0] and result.eval_episodes == 2
    # training episodes end at 80, 160, 240, 320, 400 steps: the first ending at or after each evaluation
    assert result.wall_time_s == [1.0, 1.5, 2.0] and result.metric == "return"


def test_successes_make_a_success_rate_and_no_monitor_no_wall_times(tmp_path):
    result = result_of_sb3(sb3_log(tmp_path / "log", successes=True, monitor=False), "her", "FetchReach-v4", 0)
    assert result.metric == "success_rate" and result.value == [0.0, 0.5, 1.0]
    assert result.wall_time_s == [None, None, None]


def test_the_command_appends_a_record_and_names_a_missing_file(tmp_path, capsys):
    log, out = sb3_log(tmp_path / "log"), tmp_path / "results.jsonl"
    for seed in (0, 1):
        assert main(["import-sb3", str(log), "--group", "sb3", "--task", "CartPole-v1", "--seed", str(seed),
                     "--out", str(out)]) == 0
    assert [r.seed for r in read_results(out)] == [0, 1]
    assert main(["import-sb3", str(tmp_path), "--group", "g", "--task", "t", "--seed", "0", "--out", str(out)]) == 2
    assert "has no evaluations.npz" in capsys.readouterr().err
    (tmp_path / "evaluations.npz").write_bytes(b"junk")
    with pytest.raises(ResultError, match="is not an SB3 evaluations file"):
        result_of_sb3(tmp_path, "g", "t", 0)
