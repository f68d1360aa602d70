"""``rlpipe dataset``: a run's buffer, a policy's play and a mix become datasets whose manifests say
where they came from; bad input is one line and writes nothing."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import rlpipe
from rlpipe.cli.main import main
from rlpipe.data.dataset import COLUMNS, Dataset
from rlpipe.data.dataset.format import FRAMES_FORMAT
from rlpipe.framework.middleware.ckpt_handler import latest_checkpoint
from rlpipe.recipes.build import make_buffer
from rlpipe.tools import datasets
from rlpipe.tools.datasets import dataset_from_run, mix_datasets, rollout_dataset
from rlpipe.utils.integrity import file_sha256
from tests.cli_errors import one_line_error
from tests.tiny_run import TINY_RUN


@pytest.fixture(scope="module")
def cartpole_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("runs") / "cartpole"
    rlpipe.train("cartpole-dqn", run, overrides=[*TINY_RUN, "policy.nstep=1", "run.max_env_step=600"])
    return run


def test_a_runs_buffer_becomes_a_dataset_row_for_row(cartpole_run, tmp_path):
    made = dataset_from_run(cartpole_run, tmp_path / "replay")
    unit = latest_checkpoint(cartpole_run)
    buffer = make_buffer(rlpipe.load(cartpole_run).cfg)
    buffer.load_data(str(unit.buffer_path))
    stored = buffer.sample_batch(buffer.count(), indices=buffer.ids_at(buffer.ordered_slots())).data
    assert made.size == buffer.count() == 600
    for name in ("obs", "action", "reward", "next_obs", "terminated", "truncated", "env_id"):
        np.testing.assert_array_equal(made.columns[name], stored[name])
    provenance = made.manifest["provenance"]
    assert provenance["source"] == "run" and provenance["preset"] == "cartpole-dqn" and provenance["seed"] == 0
    assert provenance["checkpoint_sha256"] == file_sha256(unit.path)
    episodes = made.manifest["episodes"]
    assert episodes["count"] > 0 and episodes["return_mean"] == pytest.approx(episodes["length_mean"])  # +1 a step


def test_a_policy_plays_whole_episodes_into_a_dataset(cartpole_run, tmp_path):
    greedy = rollout_dataset(cartpole_run, tmp_path / "greedy", 6, num_envs=3, seed=1)
    again = rollout_dataset(cartpole_run, tmp_path / "again", 6, num_envs=3, seed=1)
    noisy = rollout_dataset(cartpole_run, tmp_path / "noisy", 6, eps=1.0, num_envs=3, seed=1)
    assert greedy.manifest["episodes"]["count"] == 6 and greedy.manifest["provenance"]["acting"] == "deterministic"
    assert all(np.array_equal(greedy.columns[k], again.columns[k]) for k in greedy.columns)  # one seed, one dataset
    assert noisy.manifest["provenance"]["acting"] == "eps"
    policy = rlpipe.load(cartpole_run).policy
    greedy_actions = policy.eval_mode.forward(np.asarray(greedy.columns["obs"]))
    assert (greedy_actions == greedy.columns["action"]).all()  # greedy: the policy's own action in every row
    assert (policy.eval_mode.forward(np.asarray(noisy.columns["obs"])) != noisy.columns["action"]).any()


def test_a_mix_takes_whole_episodes_in_the_ratio(tmp_path):
    a = rollout_dataset("pendulum-td3", tmp_path / "a", 4, random_actions=True, num_envs=2)
    b = rollout_dataset("pendulum-td3", tmp_path / "b", 6, random_actions=True, num_envs=2, seed=5)
    mixed = mix_datasets(a.path, b.path, 0.5, tmp_path / "mixed")
    assert mixed.size == 1600 and mixed.manifest["episodes"]["count"] == 8  # all 800 rows of a, 4 of b's 6 episodes
    np.testing.assert_array_equal(np.sort(mixed.columns["env_id"][:800]), np.sort(a.columns["env_id"]))
    assert mixed.columns["env_id"][800:].min() > a.columns["env_id"].max()  # b's envs are told apart
    assert [p["seal"] for p in mixed.manifest["provenance"]["parents"]] == [a.seal, b.seal]


def test_the_command_line_makes_and_describes_datasets(cartpole_run, tmp_path, capsys):
    assert main(["dataset", "rollout", str(cartpole_run), "--episodes", "3", "--eps", "0.1", "--out",
                 str(tmp_path / "d"), "--random-return", "20", "--expert-return", "500"]) == 0
    capsys.readouterr()
    assert main(["dataset", "info", str(tmp_path / "d")]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["size"] == Dataset.open(tmp_path / "d").size and info["reference_returns"] == {"random": 20.0,
                                                                                               "expert": 500.0}
    mean = info["episodes"]["return_mean"]
    assert info["normalised_return_mean"] == pytest.approx(100 * (mean - 20) / 480)


@pytest.mark.parametrize("argv, message", [
    (["rollout", "RUN", "--episodes", "2", "--noise", "0.1"], "--noise does not apply to policy.type 'dqn'"),
    (["rollout", "RUN", "--episodes", "2", "--sample"], "--sample needs a policy that samples its actions"),
    (["rollout", "RUN", "--episodes", "2", "--random-return", "3"], "--random-return and --expert-return go together"),
    (["info", "NOWHERE"], "dataset NOWHERE does not exist"),
    (["from-run", "NOWHERE"], "NOWHERE is not a run directory"),
])
def test_bad_dataset_commands_are_one_line_and_write_nothing(cartpole_run, tmp_path, capsys, argv, message):
    argv = [str(cartpole_run) if a == "RUN" else str(tmp_path / "nowhere") if a == "NOWHERE" else a for a in argv]
    out = [] if argv[0] == "info" else ["--out", str(tmp_path / "out")]
    err = one_line_error(capsys, ["dataset", *argv, *out])
    assert message.replace("NOWHERE", str(tmp_path / "nowhere")) in err
    assert not (tmp_path / "out").exists()


def test_a_run_with_n_step_returns_is_refused(tmp_path, capsys):
    run = tmp_path / "run"
    rlpipe.train("cartpole-dqn", run, overrides=[*TINY_RUN, "policy.nstep=3"])
    err = one_line_error(capsys, ["dataset", "from-run", str(run), "--out", str(tmp_path / "out")])
    assert "stored 3-step returns (policy.nstep=3); a dataset holds one-step transitions" in err


def test_the_installed_command_makes_a_dataset_a_run_trains_on(cartpole_run, tmp_path):
    """As a user does: the console script, in processes of its own."""
    script = Path(sys.executable).parent / "rlpipe"
    subprocess.run([str(script), "dataset", "rollout", str(cartpole_run), "--episodes", "2", "--out",
                    str(tmp_path / "d")], check=True, capture_output=True, text=True)
    info = json.loads(subprocess.run([str(script), "dataset", "info", str(tmp_path / "d")], check=True,
                                     capture_output=True, text=True).stdout)
    assert info["size"] == Dataset.open(tmp_path / "d").size > 0 and info["episodes"]["count"] == 2
    bad = subprocess.run([str(script), "dataset", "info", str(tmp_path / "nowhere")], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0 and "does not exist" in bad.stderr


PONG = ["run.max_env_step=1200", "run.progress=false", "policy.random_collect_size=600", "policy.nstep=1",
        "env.collector_env_num=2", "policy.collect.n_sample=16", "policy.learn.batch_size=8",
        "policy.other.replay_buffer.replay_buffer_size=2000", "env.evaluator_env_num=1", "env.n_evaluator_episode=1",
        "env.atari={max_episode_steps: 200}"]  # short games, so that a rollout ends episodes soon


def test_an_atari_runs_datasets_keep_each_frame_once(tmp_path, monkeypatch):
    """From a run's frame store and from a policy's play, Pong's stacks are stored as frames once each and
    read back as the stacks the buffer held and the envs gave; a rollout kept in small chunks gives the
    same rows."""
    pytest.importorskip("ale_py")
    run = tmp_path / "pong"
    rlpipe.train("pong-dqn", run, overrides=PONG)
    made = dataset_from_run(run, tmp_path / "replay")
    buffer = make_buffer(rlpipe.load(run).cfg)
    buffer.load_data(str(latest_checkpoint(run).buffer_path))
    stored = buffer.sample_batch(buffer.count(), indices=buffer.ids_at(buffer.ordered_slots())).data
    assert made.manifest["format"] == FRAMES_FORMAT and made.size == 1200
    assert made.stored_frames is not None and made.stored_frames < 1.1 * made.size  # about a frame a row, not 8
    for name in COLUMNS:
        np.testing.assert_array_equal(np.asarray(made.columns[name]), stored[name], err_msg=name)

    greedy = rollout_dataset(run, tmp_path / "greedy", 2, num_envs=2, seed=1)
    assert greedy.manifest["format"] == FRAMES_FORMAT and greedy.stored_frames < 1.1 * greedy.size
    obs = np.asarray(greedy.columns["obs"])
    assert obs.shape == (greedy.size, 4, 84, 84) and (obs[:, :3] != 0).any()
    assert (rlpipe.load(run).policy.eval_mode.forward(obs) == greedy.columns["action"]).all()
    monkeypatch.setattr(datasets, "ROLLOUT_CHUNK", 64)  # frames kept once per 64 rows: joined across chunks
    chunked = rollout_dataset(run, tmp_path / "chunked", 2, num_envs=2, seed=1)
    for name in COLUMNS:
        np.testing.assert_array_equal(np.asarray(chunked.columns[name]), np.asarray(greedy.columns[name]))
    mixed = mix_datasets(made.path, greedy.path, 0.5, tmp_path / "mixed")
    assert mixed.stored_frames is not None and mixed.stored_frames < 1.1 * mixed.size
    np.testing.assert_array_equal(np.asarray(mixed.columns["obs"][-greedy.size:]), obs)
    offline = rlpipe.train("pong-dqn", tmp_path / "offline", overrides=[  # the learner trains from the frames
        *PONG, f"offline.dataset={mixed.path}", "policy.random_collect_size=0", "run.max_train_iter=20",
        "policy.learn.update_per_collect=10", "env.atari={max_episode_steps: 50}"])
    assert offline.summary.train_iter == 20 and offline.summary.env_step == 0
