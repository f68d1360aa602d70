"""``scripts/make_datasets.py`` trains each run it makes datasets from to its end, reuses a run that
ended, resumes one that was killed, and stops, naming the run, when a signal cuts its run short: a
dataset must never come from a run cut short (it once made the ``expert`` data from a SAC run a
quarter of the way through its budget)."""
from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

from tests.benchmark_scripts import script_module
from tests.tiny_run import TINY_RUN

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "make_datasets.py"
PERIODIC = [*TINY_RUN, "run.save_freq=50"]  # periodic checkpoints, which a killed run resumes from


@pytest.fixture(scope="module")
def make_datasets() -> ModuleType:
    return script_module(SCRIPT, "make_datasets")


def test_a_run_cut_short_is_resumed_to_its_end_then_reused(make_datasets, tmp_path, monkeypatch):
    run = tmp_path / "run"
    cut_short = make_datasets.train("cartpole-dqn", run, overrides=PERIODIC,
                                    hooks=[lambda view: view.stop() if view.env_step >= 120 else None])
    assert cut_short.summary.stopped_by is not None and (run / "summary.json").is_file()
    calls: list[bool] = []
    real_train = make_datasets.train

    def counting(*args, **kwargs):
        calls.append(kwargs["resume"])
        return real_train(*args, **kwargs)

    monkeypatch.setattr(make_datasets, "train", counting)
    assert make_datasets._train("cartpole-dqn", run, PERIODIC) == run
    assert calls == [True]  # resumed, not reused: summary.json and the final checkpoint are there, not its end
    summary = json.loads((run / "summary.json").read_text())
    assert summary["env_step"] >= 200 and summary["stopped_by"] is None
    make_datasets._train("cartpole-dqn", run, PERIODIC)
    assert calls == [True]  # it ended: reused, not trained again


def test_a_run_stopped_by_a_signal_stops_the_script_naming_it(make_datasets, tmp_path, monkeypatch):
    stopped = SimpleNamespace(summary=SimpleNamespace(stopped_by="SIGTERM", env_step=4000))
    monkeypatch.setattr(make_datasets, "train", lambda *args, **kwargs: stopped)
    run = tmp_path / "expert"
    with pytest.raises(SystemExit, match=rf"^make_datasets: {run} was stopped by SIGTERM at env step 4000; run the "
                                         "script again to resume it$"):
        make_datasets._train("hopper-sac", run, [])
