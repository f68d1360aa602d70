"""The command line: train/eval/presets/plot, and one-line errors for bad input."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlpipe.cli.main import _parse, main
from rlpipe.config import load_config
from rlpipe.data import DequeBuffer
from rlpipe.entry.train import describe_run
from rlpipe.utils import precision
from tests.cli_errors import one_line_error
from tests.run_checks import saved_buffer
from tests.tiny_run import TINY_RUN

TINY = [*TINY_RUN, "run.max_env_step=400", "policy.learn.update_per_collect=2", "run.save_freq=20", "run.log_freq=5"]


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("runs") / "tiny"
    assert main(["train", "cartpole-dqn", *TINY, "--run-dir", str(run_dir)]) == 0
    return run_dir


def test_train_writes_a_complete_run_directory(trained_run):
    summary = json.loads((trained_run / "summary.json").read_text())
    assert summary["env_step"] >= 400 and summary["train_iter"] > 0
    assert summary["best_eval_return"] is not None and summary["solved"] is False
    assert summary["wall_time_s"] > 0
    assert (trained_run / "config.yaml").read_text().count("obs_shape: 4") == 1
    kinds = {json.loads(line)["kind"] for line in (trained_run / "metrics.jsonl").read_text().splitlines()}
    assert kinds == {"train", "eval"}
    names = {p.name for p in (trained_run / "ckpt").iterdir()}
    assert {"eval.pth.tar", "final.pth.tar"} <= names and any(n.startswith("iteration_") for n in names)


def test_eval_reloads_the_best_checkpoint(trained_run, capsys):
    assert main(["eval", str(trained_run), "--episodes", "3"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["episodes"] == 3 and 8 <= result["return_mean"] <= 500


@pytest.mark.parametrize("checkpoint", ["best", "final", "ckpt/final.pth.tar"])
def test_eval_takes_checkpoint_names_or_a_path(trained_run, capsys, checkpoint):
    if checkpoint.endswith(".pth.tar"):
        checkpoint = str(trained_run / checkpoint)
    assert main(["eval", str(trained_run), "--episodes", "2", "--checkpoint", checkpoint]) == 0
    assert json.loads(capsys.readouterr().out)["episodes"] == 2


def test_eval_names_a_missing_checkpoint(trained_run, capsys):
    err = one_line_error(capsys, ["eval", str(trained_run), "--checkpoint", "nope.pth.tar"])
    assert "no checkpoint file nope.pth.tar" in err


def test_plot_draws_a_png(trained_run, tmp_path):
    out = tmp_path / "curve.png"
    assert main(["plot", str(trained_run), "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_presets_lists_builtin_presets(capsys):
    assert main(["presets"]) == 0
    assert "cartpole-dqn" in capsys.readouterr().out.split()



@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["train", "cartpole-dqn", "policy.learn.batchsize=3"], "did you mean 'policy.learn.batch_size'?"),
        (["train", "cartpole-dqn", "policy.learn.batch_size=0"], "policy.learn.batch_size"),
        (["train", "cartpol-dqn"], "unknown preset 'cartpol-dqn'"),
        (["train", "cartpole-dqn", "env.env_id=CartPole-v9"], "unknown gymnasium environment 'CartPole-v9'"),
        (["train", "cartpole-dqn", "policy.model.obs_shape=6"], "'policy.model.obs_shape' is 6 but env"),
        (["train", "missing.yaml"], "config file not found: missing.yaml"),
        (["train", "cartpole-dqn", "policy.collect.unroll_len=4"], "policy.collect.unroll_len > 1 needs a sequence"),
        (["train", "cartpole-dqn", "policy.collect.n_sample=null"], "policy.collect.n_sample must be set"),
        (["train", "cartpole-dqn", "policy.priority_IS_weight=true"], "policy.priority_IS_weight needs"),
        (["train", "cartpole-dqn", "policy.other.replay_buffer.replay_buffer_size=10"],
         "replay_buffer_size (10) is smaller than policy.learn.batch_size (64)"),
        (["train", "bitflip-dqn", "policy.other.her.her_strategy=final"],
         "policy.other.her needs policy.collect.n_episode"),
        (["train", "bitflip-her-dqn", "policy.nstep=3"], "policy.other.her needs policy.nstep=1"),
        (["train", "bitflip-her-dqn", "policy.priority=true"], "policy.priority is not supported together"),
        (["train", "bitflip-her-dqn", "env.env_kwargs.n_bits=0"],
         "config key 'env.env_kwargs': env 'rlpipe/BitFlip-v0'"),
        (["train", "cartpole-dqn", "env.env_kwargs.foo=3"], "config key 'env.env_kwargs': env 'CartPole-v1'"),
        (["train", "cartpole-dqn", "env.step_timeout=5"], "env.step_timeout needs env.asynchronous=true"),
        (["train", "cartpole-dqn", "env.asynchronous=true", "env.step_timeout=0"], "env.step_timeout"),
    ],
)
def test_bad_train_input_fails_in_one_line(capsys, tmp_path, argv, expected):
    err = one_line_error(capsys, [*argv, "--run-dir", str(tmp_path / "run")])
    assert expected in err
    assert not (tmp_path / "run").exists()  # nothing was started


def test_existing_run_is_never_overwritten(trained_run, capsys):
    before = (trained_run / "summary.json").read_text()
    err = one_line_error(capsys, ["train", "cartpole-dqn", *TINY, "--run-dir", str(trained_run)])
    assert "already holds a run" in err
    assert (trained_run / "summary.json").read_text() == before


def test_eval_rejects_a_non_positive_episode_count(trained_run, capsys):
    with pytest.raises(SystemExit) as info:
        main(["eval", str(trained_run), "--episodes", "-1"])
    assert info.value.code == 2
    assert "must be a positive integer, got -1" in capsys.readouterr().err


def test_eval_with_missing_or_corrupt_checkpoint(trained_run, capsys, tmp_path):
    assert "not a run directory" in one_line_error(capsys, ["eval", str(tmp_path)])
    corrupt = tmp_path / "bad.pth.tar"
    corrupt.write_bytes(b"garbage")
    err = one_line_error(capsys, ["eval", str(trained_run), "--checkpoint", str(corrupt)])
    assert f"checkpoint {corrupt} is damaged or not an rlpipe checkpoint" in err


def test_console_script_is_installed():
    script = Path(sys.executable).parent / "rlpipe"
    out = subprocess.run([str(script), "presets"], capture_output=True, text=True, check=True)
    assert "cartpole-dqn" in out.stdout


def test_resume_continues_counters_buffer_and_metrics(tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert main(["train", "cartpole-dqn", *TINY, "--run-dir", str(run_dir)]) == 0
    first = json.loads((run_dir / "summary.json").read_text())
    records_before = len((run_dir / "metrics.jsonl").read_text().splitlines())
    assert saved_buffer(run_dir / "ckpt" / "final.pth.tar").is_file()
    assert main(["resume", str(run_dir), "run.max_env_step=800", "run.progress=false"]) == 0
    second = json.loads((run_dir / "summary.json").read_text())
    assert second["env_step"] >= 800 and second["train_iter"] > first["train_iter"]
    assert second["wall_time_s"] > first["wall_time_s"]
    # the buffer saved at the end holds every transition of both runs: what the collector and
    # the 3-step accumulator still held when each run stopped went to the buffer before the save
    buffer = DequeBuffer(size=20000)
    buffer.load_data(str(saved_buffer(run_dir / "ckpt" / "final.pth.tar")))
    assert buffer.count() == second["env_step"]
    assert len((run_dir / "metrics.jsonl").read_text().splitlines()) > records_before


def test_resume_without_a_run_fails_in_one_line(capsys, tmp_path):
    assert "not a run directory" in one_line_error(capsys, ["resume", str(tmp_path)])



class AlwaysFails(gym.Env):
    """A CartPole-shaped env whose every step raises."""

    observation_space = gym.spaces.Box(-1.0, 1.0, shape=(4,), dtype=np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        return np.zeros(4, dtype=np.float32), {}

    def step(self, action):
        raise RuntimeError("physics exploded")


if "rlpipe-test/AlwaysFails-v0" not in gym.registry:
    gym.register("rlpipe-test/AlwaysFails-v0", entry_point=AlwaysFails)


def test_an_environment_that_keeps_failing_stops_training_in_one_line(capsys, tmp_path):
    argv = ["train", "cartpole-dqn", *TINY, "env.env_id=rlpipe-test/AlwaysFails-v0", "--run-dir", str(tmp_path / "r")]
    err = one_line_error(capsys, argv)
    assert "environment rlpipe-test/AlwaysFails-v0 failed 4 times in a row" in err and "physics exploded" in err
    assert (tmp_path / "r" / "config.yaml").is_file()  # what was written stays


def test_train_first_says_where_the_run_goes_and_its_replay_ratio(capsys, tmp_path):
    run_dir = tmp_path / "r"
    assert main(["train", "cartpole-dqn", *TINY, "policy.learn.replay_ratio=0.5", "--run-dir", str(run_dir)]) == 0
    first, *_, last = capsys.readouterr().out.strip().splitlines()
    assert first == f"cartpole-dqn (dqn) in {run_dir} on cpu: 20 gradient updates per 40 env steps (replay ratio 0.5)"
    assert json.loads(last)["updates_per_env_step"] == 0.5


def test_the_first_line_names_bf16_products_when_asked_for(monkeypatch):
    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset({"avx512_bf16"}))
    plain, mixed = (load_config("pendulum-sac", extra) for extra in ([], ["policy.learn.precision=bf16-mixed"]))
    first = describe_run(plain, Path("r"))
    assert first == "pendulum-sac (sac) in r on cpu: 8 gradient updates per 8 env steps (replay ratio 1)"
    assert describe_run(mixed, Path("r")) == first + ", bf16-mixed products"


def test_the_first_line_says_which_device_trains():
    cuda = load_config("cartpole-dqn", ["policy.cuda=true"])
    no_gpu = "on cpu (policy.cuda=true, but torch sees no GPU)"
    expected = f"on cuda ({torch.cuda.get_device_name()})" if torch.cuda.is_available() else no_gpu
    assert describe_run(cuda, Path("r")).startswith(f"cartpole-dqn (dqn) in r {expected}: ")


def test_the_first_line_says_when_bf16_falls_back_to_fp32(monkeypatch):
    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset({"avx2"}))
    mixed = load_config("pendulum-sac", ["policy.learn.precision=bf16-mixed"])
    assert describe_run(mixed, Path("r")).endswith(": 8 gradient updates per 8 env steps (replay ratio 1), "
                                                   "fp32 products (no native bfloat16 here)")


def test_overrides_may_stand_after_options(tmp_path):
    run_dir = tmp_path / "run"
    assert main(["train", "cartpole-dqn", "--no-progress", "--run-dir", str(run_dir), *TINY, "seed=3"]) == 0
    assert "seed: 3" in (run_dir / "config.yaml").read_text().splitlines()
    with pytest.raises(SystemExit) as exit_:
        main(["train", "cartpole-dqn", "--no-progress", "--bogus"])
    assert exit_.value.code == 2


def test_sweep_overrides_may_stand_after_options():
    """The issue's own spelling: ``rlpipe sweep PRESETS --seeds 0-9 [key=value ...] --out DIR``."""
    args = _parse(["sweep", "cartpole-dqn", "--seeds", "0-2", "--label", "x", "run.max_env_step=5", "seed=1",
                   "--out", "sweeps/x"])
    assert args.presets == ["cartpole-dqn", "run.max_env_step=5", "seed=1"] and str(args.out) == "sweeps/x"
    with pytest.raises(SystemExit):
        _parse(["sweep", "cartpole-dqn", "--seeds", "0", "--out", "o", "stray"])
