"""Training from a dataset: offline only (no env steps, stops at its updates, resumes exactly) and
offline-to-online (each batch shared between the dataset and the online buffer as the config says)."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import rlpipe
from rlpipe.config import ConfigError, load_config
from rlpipe.data.dataset import DatasetBuffer, write_dataset
from rlpipe.data.dataset.buffer import SAMPLER_FORMAT
from rlpipe.framework import OnlineRLContext, Task
from rlpipe.framework.middleware import OffPolicyLearner
from rlpipe.framework.middleware.ckpt_handler import latest_checkpoint
from rlpipe.recipes.build import make_policy
from rlpipe.tools.datasets import rollout_dataset
from rlpipe.utils.checkpoint import load_checkpoint
from rlpipe.utils.metrics import read_metrics

REPO = Path(__file__).resolve().parents[2]
SMALL = ["policy.model.encoder_hidden_size_list=[32,32]", "policy.learn.batch_size=32", "run.progress=false",
         "env.n_evaluator_episode=2", "env.evaluator_env_num=2", "policy.eval.evaluator.eval_freq=100"]
OFFLINE = [*SMALL, "policy.type=td3_bc", "policy.nstep=1", "policy.learn.replay_ratio=null",
           "policy.learn.update_per_collect=50",
           "run.max_train_iter=300", "run.save_freq=100"]


@pytest.fixture(scope="module")
def pendulum_data(tmp_path_factory):
    """Random play on Pendulum: 4 episodes, 800 transitions."""
    return rollout_dataset("pendulum-td3", tmp_path_factory.mktemp("data") / "pendulum", 4, random_actions=True,
                           num_envs=2)


def offline(dataset, *more):
    return [*OFFLINE, f"offline.dataset={dataset.path}", *more]


def policy_tensors(checkpoint) -> dict[str, torch.Tensor]:
    state = load_checkpoint(checkpoint, required=("policy",))["policy"]
    return {f"{part}.{k}": v for part in ("actor", "critic") for k, v in state[part].items()}


def test_an_offline_run_takes_no_env_steps_and_stops_at_its_updates(pendulum_data, tmp_path):
    lines = []
    result = rlpipe.train("pendulum-td3", tmp_path / "run", overrides=offline(pendulum_data), announce=lines.append)
    assert result.summary.env_step == 0 and result.summary.train_iter == 300
    assert "offline, 50 gradient updates per iteration from" in lines[0]
    evaluations = [r for r in read_metrics(tmp_path / "run") if r["kind"] == "eval"]
    assert [r["train_iter"] for r in evaluations] == [50, 150, 250]  # after the first iteration, then every 100
    unit = latest_checkpoint(tmp_path / "run")
    assert unit.buffer_path.stat().st_size < 4096  # the sampler's state, not the dataset
    assert SAMPLER_FORMAT in str(np.load(unit.buffer_path)["__header__"])


def test_an_offline_run_resumed_halfway_ends_as_one_run_straight_through(pendulum_data, tmp_path):
    straight = rlpipe.train("pendulum-td3", tmp_path / "straight", overrides=offline(pendulum_data))
    rlpipe.train("pendulum-td3", tmp_path / "halves", overrides=offline(pendulum_data, "run.max_train_iter=150"))
    resumed = rlpipe.train(tmp_path / "halves" / "config.yaml", tmp_path / "halves",
                           overrides=["run.max_train_iter=300"], resume=True)
    assert resumed.summary.train_iter == straight.summary.train_iter == 300
    a = policy_tensors(tmp_path / "straight" / "ckpt" / "final.pth.tar")
    b = policy_tensors(tmp_path / "halves" / "ckpt" / "final.pth.tar")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    first = policy_tensors(tmp_path / "halves" / "ckpt" / "iteration_100.pth.tar")
    assert any(not torch.equal(first[k], b[k]) for k in a)  # it did learn after resuming
    # Each evaluation is seeded from where the run is, so those after the resume play the straight
    # run's episodes (Pendulum: each start angle gives another return, so other episodes would show).
    evaluated = evaluations(tmp_path / "straight")
    assert max(evaluated) > 150 and evaluations(tmp_path / "halves") == evaluated
    assert len(set(evaluated.values())) == len(evaluated)


def evaluations(run_dir: Path) -> dict[int, tuple[float, float]]:
    """``{train_iter: (mean, std of the returns)}``; a resumed run's later record of an iteration stands."""
    return {r["train_iter"]: (r["return_mean"], r["return_std"]) for r in read_metrics(run_dir) if r["kind"] == "eval"}


def test_a_run_refuses_to_resume_on_changed_data(pendulum_data, tmp_path):
    data = write_dataset(tmp_path / "data", pendulum_data.columns, pendulum_data.observation_space,
                         pendulum_data.action_space, pendulum_data.env_id, {"source": "test"})
    rlpipe.train("pendulum-td3", tmp_path / "run", overrides=offline(data, "run.max_train_iter=100"))
    changed = {**pendulum_data.columns, "reward": np.asarray(pendulum_data.columns["reward"]) + 1.0}
    write_dataset(tmp_path / "data", changed, data.observation_space, data.action_space, data.env_id, {},
                  overwrite=True)
    with pytest.raises(ConfigError,
                       match=r"config key 'offline.dataset': dataset .* is not the one this run trained on"):
        rlpipe.train(tmp_path / "run" / "config.yaml", tmp_path / "run", overrides=["run.max_train_iter=200"],
                     resume=True)


def test_a_dataset_of_another_env_is_refused_naming_the_key(tmp_path):
    cartpole = rollout_dataset("cartpole-dqn", tmp_path / "cartpole", 2, random_actions=True, num_envs=1)
    with pytest.raises(ConfigError, match=r"config key 'offline.dataset': dataset .* holds observations Box"):
        rlpipe.train("pendulum-td3", tmp_path / "run", overrides=offline(cartpole))
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("overrides, message", [
    (["run.max_train_iter=null"], "config key 'run.max_train_iter' must be set: an offline run"),
    (["policy.nstep=3"], "config key 'offline.dataset' needs policy.nstep=1"),
    (["policy.priority=true"], "config key 'policy.priority': a dataset is sampled uniformly"),
    (["offline.pretrain_iter=10"], "config key 'offline.pretrain_iter' needs offline.dataset_share below 1"),
    (["policy.eval.evaluator.eval_every_env_steps=100", "policy.eval.evaluator.eval_freq=null"],
     "an offline run takes no env steps; evaluate every policy.eval.evaluator.eval_freq updates"),
    (["policy.learn.replay_ratio=1"], "config key 'policy.learn.replay_ratio': an offline run takes no env steps"),
    (["run.max_train_iter=120"], r"config key 'run.max_train_iter' \(120\) must be a multiple of "
     r"policy.learn.update_per_collect \(50\): an offline run stops .* so it would stop at 150"),
    (["offline.dataset_share=0.5", "offline.pretrain_iter=60", "policy.learn.update_per_collect=25"],
     r"config key 'offline.pretrain_iter' \(60\) must be a multiple of policy.learn.update_per_collect \(25\): "
     r"pretraining ends .* so it would stop at 75"),
])
def test_what_an_offline_run_cannot_do_is_one_line(overrides, message):
    with pytest.raises(ConfigError, match=message) as err:
        load_config("pendulum-td3", [*OFFLINE, "offline.dataset=x", *overrides])
    assert "\n" not in str(err.value)


def test_return_range_scales_the_rewards_learned_from_by_the_datasets_return_spread(pendulum_data, tmp_path):
    returns = pendulum_data.episodes().returns
    scale = 1000.0 / (returns.max() - returns.min())
    rlpipe.train("pendulum-td3", tmp_path / "run",
                 overrides=offline(pendulum_data, "offline.return_range=1000", "run.max_train_iter=100"))
    saved = load_config(tmp_path / "run" / "config.yaml")
    assert saved.offline.return_range == 1000 and saved.policy.learn.reward_scale == pytest.approx(scale) != 1.0
    resumed = rlpipe.train(tmp_path / "run" / "config.yaml", tmp_path / "run", overrides=["run.max_train_iter=200"],
                           resume=True)  # its filled-in scale is the one the range gives again
    assert resumed.summary.train_iter == 200
    rlpipe.train("pendulum-td3", tmp_path / "plain", overrides=offline(pendulum_data, "run.max_train_iter=100"))
    assert load_config(tmp_path / "plain" / "config.yaml").policy.learn.reward_scale == 1.0
    scaled, unscaled = (policy_tensors(run / "ckpt" / "iteration_100.pth.tar") for run in (tmp_path / "run",
                                                                                          tmp_path / "plain"))
    assert any(not torch.equal(scaled[k], unscaled[k]) for k in scaled)  # the same seed and data learned otherwise


@pytest.mark.parametrize("more, message", [
    (["policy.learn.reward_scale=2"], r"sets policy.learn.reward_scale to [\d.]+ from the dataset's returns; drop "
     "policy.learn.reward_scale=2 or offline.return_range"),
    (["BC"], "policy.type 'bc' learns from no rewards"),
    (["ONE_EPISODE"], r"needs two whole episodes of different returns to scale by their range \(1 whole episodes\)"),
])
def test_a_return_range_that_cannot_apply_is_one_line_naming_the_key(pendulum_data, tmp_path, more, message):
    config, overrides = "pendulum-td3", offline(pendulum_data, "offline.return_range=1000", *more)
    if more == ["ONE_EPISODE"]:
        one = rollout_dataset("pendulum-td3", tmp_path / "one", 1, random_actions=True, num_envs=1)
        overrides = offline(one, "offline.return_range=1000")
    if more == ["BC"]:  # behaviour cloning's own config (the docs' Pendulum one), on the same data
        config = str(REPO / "docs" / "results" / "configs" / "pendulum-medium-bc.yaml")
        overrides = [*SMALL, f"offline.dataset={pendulum_data.path}", "offline.return_range=1000"]
    with pytest.raises(ConfigError, match=f"config key 'offline.return_range'.*{message}") as err:
        rlpipe.train(config, tmp_path / "run", overrides=overrides)
    assert "\n" not in str(err.value)


def tagged(dataset, tmp_path, offset: int = 1000):
    """``dataset`` again with its env ids moved up by ``offset``, so its rows can be told from online ones."""
    columns = {**dataset.columns, "env_id": np.asarray(dataset.columns["env_id"]) + offset}
    return write_dataset(tmp_path / "tagged", columns, dataset.observation_space, dataset.action_space,
                         dataset.env_id, {"source": "test"})


def test_offline_to_online_batches_take_the_configured_share_from_the_dataset(pendulum_data, tmp_path):
    seen = []

    def record(ctx):
        for output in ctx.train_output:
            seen.append((ctx.train_iter, ctx.env_step, output))
        if ctx.train_data is not None:
            seen.append(("share", float(np.mean(np.asarray(ctx.train_data["env_id"]) >= 1000))))

    data = tagged(pendulum_data, tmp_path)
    overrides = [*SMALL, "policy.nstep=1", f"offline.dataset={data.path}", "offline.dataset_share=0.25",
                 "offline.pretrain_iter=40", "policy.learn.update_per_collect=8", "policy.random_collect_size=0",
                 "run.max_env_step=200", "policy.collect.n_sample=8"]
    rlpipe.train("pendulum-sac", tmp_path / "run", overrides=overrides, middleware={"after_learn": [record]})
    shares = {value for tag, value in (s for s in seen if s[0] == "share")}
    assert shares == {1.0, 0.25}  # the dataset alone while pretraining, then 8 of 32 rows
    updates = [(train_iter, env_step) for train_iter, env_step, _ in (s for s in seen if s[0] != "share")]
    assert all(env_step == 0 for train_iter, env_step in updates if train_iter <= 40), updates[:12]
    assert max(env_step for _, env_step in updates) >= 192


def test_the_seed_learner_trains_from_a_dataset_buffer_in_a_pipeline_without_a_collector(pendulum_data):
    cfg = load_config("pendulum-td3", [*OFFLINE, "policy.model.obs_shape=3", "policy.model.action_shape=1",
                                       "offline.dataset=unused"])
    policy = make_policy(cfg)
    task = Task()
    with task.start(ctx=OnlineRLContext()):
        task.use(OffPolicyLearner(cfg, policy.learn_mode, DatasetBuffer(pendulum_data, seed=0)))
        task.run(max_step=3)
    assert policy.train_iter == 150  # three iterations of update_per_collect


@pytest.mark.crash
def test_an_offline_run_killed_mid_run_resumes_to_the_run_straight_through(pendulum_data, tmp_path):
    overrides = offline(pendulum_data, "run.max_train_iter=600", "run.save_freq=50")
    straight = rlpipe.train("pendulum-td3", tmp_path / "straight", overrides=overrides)
    run = tmp_path / "killed"
    command = [sys.executable, "-m", "rlpipe.cli.main"]
    process = subprocess.Popen([*command, "train", "pendulum-td3", *overrides, "--run-dir", str(run)], cwd=REPO,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not list((run / "ckpt").glob("iteration_*.pth.tar")):
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        assert time.monotonic() < deadline
        time.sleep(0.05)
    process.kill()
    process.wait()
    assert not (run / "ckpt" / "final.pth.tar").exists(), "the run ended before the kill: the test needs a longer run"
    resumed = rlpipe.train(run / "config.yaml", run, resume=True)
    assert resumed.summary.train_iter == straight.summary.train_iter == 600
    a = policy_tensors(tmp_path / "straight" / "ckpt" / "final.pth.tar")
    b = policy_tensors(run / "ckpt" / "final.pth.tar")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
