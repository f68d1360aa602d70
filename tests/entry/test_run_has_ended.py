"""``run_has_ended`` tells a run that came to its end from one cut short: a run killed outright
leaves a ``summary.json`` too (written at each evaluation), so scripts that reuse finished runs
(``rlpipe sweep``, ``scripts/make_datasets.py``) must not take the file alone as the end."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rlpipe.cli.main import main
from rlpipe.entry.summary import run_has_ended
from tests.tiny_run import TINY_RUN


@pytest.fixture(scope="module")
def ended(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("ended") / "run"
    assert main(["train", "cartpole-dqn", *TINY_RUN, "--run-dir", str(run)]) == 0
    return run


def _edit_summary(run: Path, **changes) -> None:
    path = run / "summary.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


def test_a_run_that_spent_its_budget_has_ended(ended):
    assert run_has_ended(ended)


@pytest.mark.parametrize("cut", ["killed before its budget", "stopped by a signal", "no final checkpoint",
                                 "no summary"])
def test_a_run_cut_short_has_not_ended(ended, tmp_path, cut):
    run = Path(shutil.copytree(ended, tmp_path / "run"))
    if cut == "killed before its budget":
        _edit_summary(run, env_step=120)
    elif cut == "stopped by a signal":
        _edit_summary(run, stopped_by="SIGTERM")
    elif cut == "no final checkpoint":  # as a kill between the final buffer's write and the checkpoint's leaves it
        (run / "ckpt" / "final.pth.tar").unlink()
        assert any((run / "ckpt").glob("final.*.buffer.npz"))
    else:
        (run / "summary.json").unlink()
    assert not run_has_ended(run)


def test_a_run_that_solved_has_ended_only_when_it_stops_on_solve(ended, tmp_path):
    run = Path(shutil.copytree(ended, tmp_path / "run"))
    _edit_summary(run, env_step=120, solved=True)
    assert run_has_ended(run)  # cartpole-dqn stops on solve
    config = run / "config.yaml"
    config.write_text(config.read_text().replace("stop_on_solve: true", "stop_on_solve: false"))
    assert "stop_on_solve: false" in config.read_text()
    assert not run_has_ended(run)  # now only its budget ends it
