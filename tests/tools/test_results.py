"""Run results: read from a run directory, written and read as JSON lines, damaged files named in one line."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from rlpipe.entry import train
from rlpipe.tools.results import (
    ResultError,
    RunResult,
    collect_results,
    evaluation_curve,
    read_results,
    result_of_run,
    write_results,
)
from rlpipe.utils.metrics import read_metrics
from rlpipe.utils.provenance import machine_description
from tests.tiny_run import TINY_RUN


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("runs") / "tiny"
    train("cartpole-dqn", path, overrides=[*TINY_RUN, "seed=3", "policy.learn.precision=fp32"])
    return path


def test_a_run_directory_gives_its_evaluation_curve_and_settings(run_dir):
    result = result_of_run(run_dir, overrides=["seed=3"])
    evals = [r for r in read_metrics(run_dir) if r["kind"] == "eval"]
    assert result.group == "cartpole-dqn" and result.task == "CartPole-v1" and result.seed == 3
    assert result.env_step == [r["env_step"] for r in evals] and result.value == [r["return_mean"] for r in evals]
    assert result.final == evals[-1]["return_mean"] and result.best == max(r["return_mean"] for r in evals)
    times = result.wall_time_s
    assert len(times) == len(evals) and all(t is not None for t in times) and times == sorted(times)
    assert result.threshold == 475.0 and result.budget_env_steps == 200 and result.eval_episodes == 2
    assert result.settings == {"algorithm": "dqn", "precision": "fp32", "flush_denormal": True,
                               "overrides": ["seed=3"], "resumed": False, "machine": machine_description()}


def test_a_q_learning_run_under_cql_s_penalty_says_so(tmp_path, run_dir):
    copy = tmp_path / "cql"
    shutil.copytree(run_dir, copy)
    config = yaml.safe_load((copy / "config.yaml").read_text())
    config["policy"]["learn"]["cql_alpha"] = 1.0
    (copy / "config.yaml").write_text(yaml.safe_dump(config))
    assert result_of_run(copy).settings["algorithm"] == "dqn + cql"


def test_a_separate_final_evaluation_stands_for_the_final_figure(run_dir):
    result = result_of_run(run_dir, final_eval={"return_mean": 123.0, "episodes": 100})
    assert result.final == 123.0 and result.final_eval_episodes == 100 and result.value[-1] != 123.0


def test_a_resumed_run_s_repeated_evaluations_are_replaced_by_the_later_ones():
    records = [{"kind": "eval", "env_step": s, "return_mean": v} for s, v in [(10, 1.0), (20, 2.0), (30, 3.0)]]
    records += [{"kind": "train", "env_step": 25}, {"kind": "eval", "env_step": 20, "return_mean": 5.0}]
    steps, values, times = evaluation_curve(records, "return_mean")
    assert (steps, values, times) == ([10, 20], [1.0, 5.0], [None, None])


def test_records_round_trip_and_a_half_written_last_line_is_left_out(tmp_path, run_dir):
    path = tmp_path / "results.jsonl"
    result = result_of_run(run_dir)
    write_results(path, [result, result])
    with path.open("a") as file:
        file.write('{"group": "cut sh')
    assert read_results(path) == [result, result]


@pytest.mark.parametrize(("line", "message"), [
    ("not json", r"results\.jsonl:1: not JSON"),
    ('{"group": "a", "task": "t", "seed": 0, "env_step": [1], "value": [1.0], "colour": 1}', "unknown key 'colour'"),
    ('{"group": "a", "task": "t", "seed": 0, "env_step": [1, 2], "value": [1.0]}', "as many env_step as value"),
    ('{"group": "a", "task": "t", "env_step": [1], "value": [1.0]}', "not a run result"),
    ('{"group": "a", "task": "t", "seed": 0, "env_step": [1, 2], "value": [1.0, 2.0], "curve": false}',
     r"has no curve \(curve: false\), so it needs exactly one value, its final figure; it has 2"),
    ('{"group": "a", "task": "t", "seed": 0, "env_step": [1], "value": [1.0], "curve": "no"}',
     "has curve 'no', not true or false"),
])
def test_a_damaged_results_file_is_named_in_one_line(tmp_path, line, message):
    path = tmp_path / "results.jsonl"
    path.write_text(line + "\n" + json.dumps({"group": "b", "task": "t", "seed": 0, "env_step": [1], "value": [1.0]})
                    + "\n")
    with pytest.raises(ResultError, match=message) as err:
        read_results(path)
    assert "\n" not in str(err.value)


def test_collect_reads_run_directories_results_files_and_folders_of_either(tmp_path, run_dir):
    path = tmp_path / "sweep" / "results.jsonl"
    other = RunResult("other", "CartPole-v1", 0, [10], [1.0])
    write_results(path, [other])
    found = collect_results([run_dir, tmp_path / "sweep"])
    assert [r.group for r in found] == ["cartpole-dqn", "other"]
    assert [r.group for r in collect_results([run_dir.parent])] == ["cartpole-dqn"]  # a folder of run directories
    with pytest.raises(ResultError, match="no such results file"):
        collect_results([tmp_path / "missing"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ResultError, match="no run results under"):
        collect_results([tmp_path / "empty"])
