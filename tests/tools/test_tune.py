"""``rlpipe tune``: the mechanics of a study (trials, storage, resume, best config, pruning hook)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from rlpipe.cli.main import main
from rlpipe.config import load_config
from rlpipe.framework.context import OnlineRLContext
from rlpipe.tools.tune import evaluation_reporter
from tests.cli_errors import one_line_error
from tests.tiny_run import TINY_RUN

optuna = pytest.importorskip("optuna")

SPACE = ["policy.learn.learning_rate=1e-4:1e-2", "policy.model.encoder_hidden_size_list=[[32], [64, 64]]"]


def tune(study_dir: Path, trials: int, capsys, *extra: str) -> dict:
    assert main(["tune", "cartpole-dqn", "--trials", str(trials), "--study-dir", str(study_dir), *TINY_RUN, *SPACE,
                 *extra]) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def load_study(study_dir: Path):
    return optuna.load_study(study_name="rlpipe", storage=f"sqlite:///{study_dir / 'study.db'}")


@pytest.fixture(scope="module")
def study_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("tune") / "study"


def test_three_trials_make_a_study_of_runs_and_a_best_config_that_trains(study_dir, tmp_path, capsys):
    result = tune(study_dir, 3, capsys)
    trials = load_study(study_dir).get_trials()
    assert [t.state.name for t in trials] == ["COMPLETE"] * 3 and result["trials"] == {"COMPLETE": 3}
    for trial in trials:  # each trial an ordinary run, its value the run's final evaluation
        summary = json.loads((study_dir / f"trial-{trial.number}" / "summary.json").read_text())
        assert trial.value == summary["last_eval_return"]
        assert 1e-4 <= trial.params["policy.learn.learning_rate"] <= 1e-2
    best = max(trials, key=lambda t: t.value)
    assert result["best_trial"] == best.number and result["best_value"] == best.value

    cfg = load_config(study_dir / "best.yaml")
    assert cfg.policy.learn.learning_rate == best.params["policy.learn.learning_rate"]
    assert cfg.policy.model.encoder_hidden_size_list == json.loads(best.params["policy.model.encoder_hidden_size_list"])
    assert cfg.run.max_env_step == 200  # the fixed overrides too
    assert main(["train", str(study_dir / "best.yaml"), "--run-dir", str(tmp_path / "best")]) == 0


def test_running_again_continues_the_study(study_dir, capsys):
    result = tune(study_dir, 4, capsys)
    assert result["trials"] == {"COMPLETE": 4}
    assert sorted(p.name for p in study_dir.glob("trial-*")) == [f"trial-{i}" for i in range(4)]


def test_a_study_of_another_search_is_refused(study_dir, capsys):
    err = one_line_error(capsys, ["tune", "cartpole-dqn", "--trials", "5", "--study-dir", str(study_dir), *TINY_RUN,
                                  "policy.learn.learning_rate=1e-3:1e-2"])
    assert "holds a study of another config or search space" in err


class FakeTrial:
    """Records reports; asks to prune from the second report on."""

    def __init__(self) -> None:
        self.reports: list[tuple[float, int]] = []

    def report(self, value: float, step: int) -> None:
        self.reports.append((value, step))

    def should_prune(self) -> bool:
        return len(self.reports) >= 2


def test_the_reporter_reports_evaluations_at_their_env_step_and_stops_a_pruned_run():
    trial = FakeTrial()
    reporter = evaluation_reporter(trial)
    ctx = OnlineRLContext(env_step=96, eval_value=None)
    reporter(ctx)  # no evaluation this iteration: nothing to report
    assert trial.reports == [] and not ctx.finish
    ctx = OnlineRLContext(env_step=192, eval_value=20.0)
    reporter(ctx)
    assert trial.reports == [(20.0, 192)] and not ctx.finish and not reporter.pruned
    ctx = OnlineRLContext(env_step=288, eval_value=9.0)
    reporter(ctx)
    assert trial.reports[-1] == (9.0, 288) and ctx.finish and reporter.pruned


def test_two_jobs_share_one_study(tmp_path, capsys):
    result = tune(tmp_path / "study", 2, capsys, "--jobs", "2")
    assert result["trials"] == {"COMPLETE": 2}
    assert sorted(p.parent.name for p in (tmp_path / "study").glob("trial-*/summary.json")) == ["trial-0", "trial-1"]


@pytest.mark.parametrize(("argv", "expected"), [
    (["policy.learn.learnin_rate=1e-4:1e-2"], "did you mean 'policy.learn.learning_rate'?"),
    (["policy.learn.batch_size=0:64"], "policy.learn.batch_size"),
    (["policy.learn.learning_rate=1e-2:1e-4"], "range 'policy.learn.learning_rate=1e-2:1e-4' needs low < high"),
    (["run.max_env_step=300"], "nothing to search"),
])
def test_bad_searches_are_one_line(tmp_path, capsys, argv, expected):
    err = one_line_error(capsys, ["tune", "cartpole-dqn", "--trials", "1", "--study-dir", str(tmp_path), *argv])
    assert expected in err
    assert not (tmp_path / "study.db").exists()


def test_without_optuna_one_line_names_the_extra(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "optuna", None)  # import optuna raises ImportError
    err = one_line_error(capsys, ["tune", "cartpole-dqn", "--trials", "1", "--study-dir", str(tmp_path), *SPACE])
    assert "pip install 'rlpipe[tune]'" in err
