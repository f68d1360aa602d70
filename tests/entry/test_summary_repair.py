"""A damaged ``summary.json`` (not JSON, a key more or less, a value of another type) is rebuilt on
resume from ``metrics.jsonl`` and the checkpoint, with one warning line, never a traceback; a
damaged ``metrics.jsonl`` is refused in one line and changes nothing."""
from __future__ import annotations

import importlib
import json
import os
import shutil
from pathlib import Path

import pytest

from rlpipe.cli.main import main
from rlpipe.entry.summary import RunSummary, SummaryError
from rlpipe.utils.checkpoint import read_header
from tests.cli_errors import one_line_error
from tests.run_checks import snapshot, summary_agrees_with_metrics
from tests.tiny_run import TINY_RUN

TINY = [*TINY_RUN, "run.save_freq=100000"]


def _with(**changes):
    def damage(summary: dict) -> str:
        return json.dumps({**summary, **changes})

    return damage


def _without(key: str):
    def damage(summary: dict) -> str:
        return json.dumps({k: v for k, v in summary.items() if k != key})

    return damage


DAMAGES = {  # what is done to the summary, and the reason the warning names
    "bad JSON": (lambda summary: json.dumps(summary)[:-7], "not JSON"),
    "not an object": (lambda summary: json.dumps([summary]), "it holds a list, not an object"),
    "extra key": (_with(my_note="hello"), "unknown key 'my_note'"),
    "missing key": (_without("train_iter"), "key 'train_iter' missing"),
    "string count": (_with(env_step="400"), "key 'env_step' is '400', not int"),
    "number as bool": (_with(solved=1), "key 'solved' is 1, not bool"),
    "float count": (_with(train_iter=2.5), "key 'train_iter' is 2.5, not int"),
    "text figure": (_with(best_eval_return="high"), "key 'best_eval_return' is 'high', not float | None"),
}


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("summary") / "run"
    assert main(["train", "cartpole-dqn", *TINY, "--run-dir", str(run)]) == 0
    return run


@pytest.mark.parametrize("case", sorted(DAMAGES))
def test_read_names_the_damage_in_one_line(finished, tmp_path, case):
    damage, reason = DAMAGES[case]
    path = tmp_path / "summary.json"
    path.write_text(damage(json.loads((finished / "summary.json").read_text())))
    with pytest.raises(SummaryError) as info:
        RunSummary.read(path)
    assert str(info.value).startswith(f"{path} is damaged: {reason}") and "\n" not in str(info.value)


@pytest.mark.parametrize("case", ["bad JSON", "extra key", "missing key", "string count"])
def test_resume_rebuilds_a_damaged_summary(finished, tmp_path, case, caplog, capsys):
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    damage, reason = DAMAGES[case]
    summary_file = run / "summary.json"
    summary_file.write_text(damage(json.loads(summary_file.read_text())))
    assert main(["resume", str(run), "run.max_env_step=600", "--no-progress"]) == 0
    assert "Traceback" not in capsys.readouterr().err
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "\n" not in warnings[0]
    assert warnings[0].startswith(f"{summary_file} is damaged: {reason}")
    assert warnings[0].endswith(": rebuilt from metrics.jsonl and the checkpoint (its wall time starts again at 0)")
    summary = summary_agrees_with_metrics(run)
    assert summary["env_step"] >= 600
    assert summary["run_id"] == read_header(run / "ckpt" / "final.pth.tar").run_id  # the run keeps its identity


def test_a_damaged_metrics_file_is_refused_in_one_line(finished, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    metrics = run / "metrics.jsonl"
    metrics.write_text(metrics.read_text() + '{"kind": "eval", "env_st\n')
    (run / "summary.json").write_text("{")
    before = snapshot(run)
    err = one_line_error(capsys, ["resume", str(run), "run.max_env_step=600"])
    assert err.startswith(f"rlpipe resume: error: {metrics} is damaged (")
    assert err.endswith("): the run's evaluations cannot be read back")
    assert snapshot(run) == before


def test_the_summary_names_the_code_and_machine_that_ran_from_start_to_each_resume(finished, tmp_path, monkeypatch):
    """A run's records name the code and machine at its start, and those of a resume that ran other code
    on another machine: not the code or machine at the moment its result is read."""
    from rlpipe.tools.results import result_of_run
    from rlpipe.utils.provenance import machine_description

    train_module = importlib.import_module("rlpipe.entry.train")  # the module: rlpipe.entry.train is the function

    started = json.loads((finished / "summary.json").read_text())
    assert started["code"] and started["code"] == result_of_run(finished).source
    assert started["machine"] == machine_description() == result_of_run(finished).settings["machine"]
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    monkeypatch.setattr(train_module, "code_version", lambda: "later123")
    monkeypatch.setattr(train_module, "machine_description", lambda device: "Other CPU, 64 cores, AVX512")
    assert main(["resume", str(run), "run.max_env_step=600", "--no-progress"]) == 0
    summary = json.loads((run / "summary.json").read_text())
    assert summary["code"] == result_of_run(run).source == f"{started['code']}, later123"
    assert summary["machine"] == result_of_run(run).settings["machine"] == (f"{started['machine']}; "
                                                                             "Other CPU, 64 cores, AVX512")


def test_the_machine_names_the_cpu_its_cores_and_torch_kernels_and_a_gpu_when_one_runs(monkeypatch):
    import torch

    from rlpipe.utils.provenance import machine_description

    cpu, cores, kernels = machine_description().split(", ")
    assert cpu and cores == f"{len(os.sched_getaffinity(0))} cores"
    assert kernels == torch.backends.cpu.get_cpu_capability()
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device: "Some GPU")
    assert machine_description("cuda") == f"{machine_description()}, Some GPU"


def test_resumes_on_one_machine_name_it_once_and_each_other_machine_after_it():
    summary = RunSummary()
    gpu, cpu = "AMD EPYC, 16 cores, AVX2, Some GPU", "Intel Xeon, 2 cores, AVX512"
    for code, machine in [("a1", gpu), ("a1", gpu), ("b2", cpu), ("b2", gpu)]:
        summary.add_provenance(code, machine)
    assert summary.code == "a1, b2" and summary.machine == f"{gpu}; {cpu}"


@pytest.mark.parametrize("key", ["code", "machine"])
def test_a_summary_from_before_a_provenance_key_reads_and_resumes(finished, tmp_path, caplog, key):
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    summary_file = run / "summary.json"
    summary_file.write_text(_without(key)(json.loads(summary_file.read_text())))
    assert getattr(RunSummary.read(summary_file), key) is None
    assert main(["resume", str(run), "run.max_env_step=600", "--no-progress"]) == 0
    assert not [r for r in caplog.records if r.levelname == "WARNING"]  # not taken for damage
    assert json.loads(summary_file.read_text())[key]
