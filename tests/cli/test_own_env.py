"""Your own environment from the command line: ``module:EnvId``, ``env.import``, ``env.wrappers``;
the run is evaluated (in a fresh process, which must import the module again) and resumed."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rlpipe.cli.main import main
from rlpipe.utils.metrics import read_metrics
from tests.cli_errors import one_line_error
from tests.tiny_run import TINY_RUN

REPO = Path(__file__).resolve().parents[2]
TINY = [*TINY_RUN, "env.collector_env_num=2", "run.save_freq=20"]
WAYS = {
    "module:EnvId": ["env.env_id=tests.corridor_env:Corridor-v0"],
    "env.import": ["env.env_id=Corridor-v0", "env.import=[tests.corridor_env]"],
}


@pytest.mark.parametrize("way", sorted(WAYS))
def test_train_eval_and_resume_a_run_on_your_own_env(tmp_path, capsys, way):
    run_dir = tmp_path / "run"
    assert main(["train", "cartpole-dqn", *TINY, *WAYS[way], "--run-dir", str(run_dir)]) == 0
    evaluated = subprocess.run(
        [sys.executable, "-m", "rlpipe.cli.main", "eval", str(run_dir), "--episodes", "2"],
        cwd=REPO, capture_output=True, text=True, check=True,
    )
    assert json.loads(evaluated.stdout.strip().splitlines()[-1])["episodes"] == 2
    assert main(["resume", str(run_dir), "run.max_env_step=400", "--no-progress"]) == 0
    assert json.loads((run_dir / "summary.json").read_text())["env_step"] >= 400


def test_wrappers_from_the_config_wrap_every_env(tmp_path):
    run_dir = tmp_path / "run"
    wrappers = "env.wrappers=[{type: TimeLimit, kwargs: {max_episode_steps: 3}}]"
    assert main(["train", "cartpole-dqn", *TINY, *WAYS["module:EnvId"], wrappers, "--run-dir", str(run_dir)]) == 0
    evals = [r for r in read_metrics(run_dir) if r["kind"] == "eval"]
    assert evals and all(r["episode_length_mean"] <= 3 for r in evals)  # a corridor of 6 needs 5 steps


@pytest.mark.parametrize(("override", "message"), [
    ("env.env_id=tests.no_such_module:Corridor-v0",
     "config key 'env.env_id': cannot import module 'tests.no_such_module' (No module named 'tests.no_such_module')"),
    ("env.import=[tests.no_such_module]", "config key 'env.import': cannot import module 'tests.no_such_module'"),
    ("env.wrappers=[{type: NoSuchWrapper}]", "config key 'env.wrappers[0].type': gymnasium.wrappers has no wrapper"),
    ("env.wrappers=[{type: TimeLimit, kwargs: {steps: 3}}]", "config key 'env.wrappers[0]': TimeLimit(**{'steps': 3})"),
])
def test_bad_own_env_settings_are_one_line(capsys, override, message):
    err = one_line_error(capsys, ["train", "cartpole-dqn", *TINY, override])
    assert message in err

