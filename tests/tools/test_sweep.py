"""rlpipe sweep: presets x seeds as runs of their own, results recorded as they finish, a sweep continued
by running the same command again (finished runs skipped, killed ones resumed), and on Ray."""
from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import rlpipe
from rlpipe.cli.main import main
from rlpipe.config import dump_config, load_config
from rlpipe.tools.results import read_results
from rlpipe.tools.sweep import Placement, Sweep, SweepError, parse_seeds, run_sweep
from tests.run_checks import snapshot
from tests.tiny_run import TINY_RUN

REPO = Path(__file__).resolve().parents[2]


def test_seeds_as_ranges_and_lists():
    assert parse_seeds("0-3") == [0, 1, 2, 3]
    assert parse_seeds("5, 0-1,1") == [0, 1, 5]
    for text, message in [("a", "'a' is not a seed"), ("3-1", "'3-1' is not a range"), ("-2", "'-2' is not")]:
        with pytest.raises(SweepError, match=message):
            parse_seeds(text)


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("sweeps") / "tiny"
    assert main(["sweep", "cartpole-dqn", "cartpole-c51", *TINY_RUN, "--seeds", "0-1", "--out", str(out),
                 "--jobs", "2"]) == 0
    return out


def test_every_preset_and_seed_is_a_run_with_its_result_recorded(finished):
    records = read_results(finished / "results.jsonl")
    assert sorted((r.group, r.seed) for r in records) == [("cartpole-c51", 0), ("cartpole-c51", 1),
                                                          ("cartpole-dqn", 0), ("cartpole-dqn", 1)]
    assert all(r.settings["overrides"] == TINY_RUN and r.budget_env_steps == 200 for r in records)
    for record in records:
        run_dir = finished / f"{record.group}-seed{record.seed}"
        assert (run_dir / "ckpt" / "final.pth.tar").is_file()
        assert "seed: " + str(record.seed) in (run_dir / "config.yaml").read_text()
        assert (finished / "logs" / f"{run_dir.name}.log").read_text().startswith("$ rlpipe train ")


def test_running_it_again_trains_nothing(finished, capsys):
    before = snapshot(finished)
    assert main(["sweep", "cartpole-dqn", "cartpole-c51", *TINY_RUN, "--seeds", "0-1", "--out", str(finished)]) == 0
    assert "4 runs, 4 recorded already, 0 to run" in capsys.readouterr().out
    assert snapshot(finished) == before


def test_more_seeds_add_runs_and_other_overrides_are_refused(finished, capsys):
    with pytest.raises(SweepError, match="holds a sweep with overrides"):
        run_sweep(Sweep(("cartpole-dqn",), (0,), ("run.max_env_step=300",), finished))
    assert main(["sweep", "cartpole-dqn", *TINY_RUN, "seed=4", "--seeds", "0", "--out", str(finished)]) == 2
    assert "'seed' is set by the sweep for each run" in capsys.readouterr().err
    assert main(["sweep", "cartpole-dqn", *TINY_RUN, "policy.learn.batch_sise=3", "--seeds", "0", "--out",
                 str(finished / "other")]) == 2
    assert "did you mean 'policy.learn.batch_size'" in capsys.readouterr().err
    with pytest.raises(SweepError, match="--address needs --backend ray"):
        run_sweep(Sweep(("cartpole-dqn",), (0,), tuple(TINY_RUN), finished), Placement(address="1.2.3.4:6379"))


def test_a_label_names_the_groups(tmp_path):
    run_sweep(Sweep(("cartpole-dqn",), (0,), (*TINY_RUN, "run.flush_denormal=false"), tmp_path, "noflush"))
    (record,) = read_results(tmp_path / "results.jsonl")
    assert record.group == "cartpole-dqn:noflush" and record.settings["flush_denormal"] is False


def test_the_final_policy_is_evaluated_apart_when_asked(tmp_path):
    run_sweep(Sweep(("cartpole-dqn",), (0,), tuple(TINY_RUN), tmp_path, final_episodes=3))
    (record,) = read_results(tmp_path / "results.jsonl")
    assert record.final_eval_episodes == 3 and record.final == record.final_eval is not None
    assert "$ rlpipe eval " in (tmp_path / "logs" / "cartpole-dqn-seed0.log").read_text()
    with pytest.raises(SweepError, match=r"holds a sweep with .* final_episodes 3"):
        run_sweep(Sweep(("cartpole-dqn",), (0,), tuple(TINY_RUN), tmp_path, final_episodes=5))


def test_a_config_file_names_its_runs_and_a_run_stopped_before_its_first_checkpoint_starts_again(tmp_path):
    config = tmp_path / "configs" / "my-cartpole.yaml"
    config.parent.mkdir()
    dump_config(load_config("cartpole-dqn", TINY_RUN), config)
    out = tmp_path / "sweep"
    stopped = out / "my-cartpole-seed0"
    rlpipe.train(config, stopped, overrides=["seed=0"])
    for path in (stopped / "ckpt").iterdir():  # as if stopped when only the best evaluation's policy was saved
        if path.name != "eval.pth.tar":
            path.unlink()
    run_sweep(Sweep((str(config),), (0,), (), out))
    (record,) = read_results(out / "results.jsonl")
    assert record.group == "my-cartpole" and (stopped / "ckpt" / "final.pth.tar").is_file()
    assert sorted(path.name for path in config.parent.iterdir()) == ["my-cartpole.yaml"]
    log = (out / "logs" / "my-cartpole-seed0.log").read_text()
    assert log.count("$ rlpipe train") == 1 and "$ rlpipe resume" not in log
    twin = tmp_path / "other" / "my-cartpole.yaml"
    twin.parent.mkdir()
    twin.write_text(config.read_text())
    with pytest.raises(SweepError, match="presets named 'my-cartpole' more than once"):
        run_sweep(Sweep((str(config), str(twin)), (0,), (), tmp_path / "twins"))


def test_a_failed_run_is_named_and_the_others_finish(tmp_path, capsys):
    # a run whose env id names a module that does not exist fails in its own process
    assert main(["sweep", "cartpole-dqn", *TINY_RUN, "env.env_id=no_such_module:Env-v0", "--seeds", "0-1",
                 "--out", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert "[2/2] cartpole-dqn seed 1: FAILED (exit status 2): rlpipe train: error: config key 'env.env_id'" in out
    assert err.startswith("rlpipe sweep: error: sweep: 2 of 2 runs failed, first cartpole-dqn-seed0 (exit status 2")
    assert err.count("\n") == 1 and not (tmp_path / "results.jsonl").exists()


RUN = [*TINY_RUN, "run.max_env_step=6000", "run.save_freq=10", "run.stop_on_solve=false"]
"""Runs of several seconds with a checkpoint every few iterations, so a kill comes mid-run."""


def _sweep_process(out: Path, jobs: int = 1) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "rlpipe.cli.main", "sweep", "cartpole-dqn", *RUN, "--seeds", "0-1",
                             "--out", str(out), "--jobs", str(jobs)], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _wait_for(condition, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def _runs_of(out: Path) -> list[int]:
    """Processes still training a run of the sweep (their command line names its directory)."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and str(out).encode() in (entry / "cmdline").read_bytes():
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def _recorded(out: Path) -> list[int]:
    path = out / "results.jsonl"
    return sorted(r.seed for r in read_results(path)) if path.is_file() else []


@pytest.mark.crash
def test_a_killed_sweep_skips_its_finished_run_and_resumes_the_killed_one(tmp_path):
    out = tmp_path / "sweep"
    process = _sweep_process(out)
    second = out / "cartpole-dqn-seed1" / "ckpt"
    _wait_for(lambda: any(second.glob("iteration_*.pth.tar")))
    process.kill()
    process.wait()
    assert _recorded(out) == [0], "seed 1 finished before the kill: the test needs a longer run"
    _wait_for(lambda: not _runs_of(out), timeout=30.0)  # a killed sweep's runs end with it
    first = snapshot(out / "cartpole-dqn-seed0")
    again = _sweep_process(out)
    stdout, stderr = again.communicate(timeout=300)
    assert again.returncode == 0, stderr
    assert "2 runs, 1 recorded already, 1 to run" in stdout and "[2/2] cartpole-dqn seed 1: final" in stdout
    assert snapshot(out / "cartpole-dqn-seed0") == first
    log = (out / "logs" / "cartpole-dqn-seed1.log").read_text()
    assert log.count("$ rlpipe train") == 1 and log.count("$ rlpipe resume") == 1
    records = {r.seed: r for r in read_results(out / "results.jsonl")}
    assert records[1].settings["resumed"] and not records[0].settings["resumed"]
    assert records[1].env_step[-1] == 6000


@pytest.mark.crash
def test_a_signal_stops_every_run_gracefully_and_the_sweep_continues_later(tmp_path):
    out = tmp_path / "sweep"
    process = _sweep_process(out, jobs=2)
    _wait_for(lambda: all(any((out / f"cartpole-dqn-seed{s}" / "ckpt").glob("iteration_*")) for s in (0, 1)))
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 128 + signal.SIGINT
    assert stderr.strip().endswith("stopped by SIGINT; run the same command again to continue the sweep")
    for seed in (0, 1):
        summary = (out / f"cartpole-dqn-seed{seed}" / "summary.json").read_text()
        assert '"stopped_by": "SIGINT"' in summary
        assert (out / f"cartpole-dqn-seed{seed}" / "ckpt" / "final.pth.tar").is_file()
    assert _recorded(out) == []
    again = _sweep_process(out, jobs=2)
    _, stderr = again.communicate(timeout=300)
    assert again.returncode == 0, stderr
    assert _recorded(out) == [0, 1]
