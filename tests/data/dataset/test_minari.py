"""Minari's datasets through minari itself: one made with minari's own DataCollector trains an rlpipe
agent, and one rlpipe writes loads with ``minari.load_dataset``."""
from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest

import rlpipe
from rlpipe.data.dataset import DatasetError
from rlpipe.data.dataset.minari_io import read_minari, write_minari
from rlpipe.tools.datasets import copy_dataset, rollout_dataset

minari = pytest.importorskip("minari")  # the offline extra; scripts/test.sh installs it


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    return tmp_path / "minari"


def collect_cartpole(dataset_id: str, episodes: int = 8) -> None:
    """Random CartPole play recorded by minari's DataCollector into the local store."""
    env = minari.DataCollector(gym.make("CartPole-v1"))
    env.action_space.seed(0)
    for episode in range(episodes):
        env.reset(seed=episode)
        done = False
        while not done:
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            done = terminated or truncated
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # minari warns about a missing description and eval env
        env.create_dataset(dataset_id, algorithm_name="random")


def test_a_minari_collected_dataset_trains_an_rlpipe_agent(store, tmp_path):
    collect_cartpole("test/cartpole-random-v0")
    dataset = read_minari("minari:test/cartpole-random-v0")
    source = minari.load_dataset("test/cartpole-random-v0")
    assert dataset.size == source.total_steps and dataset.manifest["episodes"]["count"] == source.total_episodes
    first = next(source.iterate_episodes())
    np.testing.assert_array_equal(dataset.columns["obs"][: len(first.rewards)], first.observations[:-1])
    np.testing.assert_array_equal(dataset.columns["next_obs"][: len(first.rewards)], first.observations[1:])
    result = rlpipe.train("cartpole-dqn", tmp_path / "run", overrides=[
        "offline.dataset=minari:test/cartpole-random-v0", "run.max_train_iter=60", "policy.learn.update_per_collect=20",
        "policy.learn.batch_size=16", "policy.eval.evaluator.eval_freq=20", "env.n_evaluator_episode=2",
        "env.evaluator_env_num=2", "run.progress=false", "policy.nstep=1", "policy.learn.replay_ratio=null"])
    assert result.summary.train_iter == 60 and result.summary.env_step == 0


def test_an_rlpipe_dataset_loads_with_minari_load_dataset(store, tmp_path):
    made = rollout_dataset("pendulum-td3", tmp_path / "pendulum", 3, random_actions=True, num_envs=2,
                           reference_returns={"random": -1200.0, "expert": -150.0})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        write_minari(made, "rlpipe/pendulum-random-v0")
    loaded = minari.load_dataset("rlpipe/pendulum-random-v0")
    assert loaded.total_episodes == 3 and loaded.total_steps == made.size == 600
    episode_rows = sorted(made.episodes().rows, key=lambda rows: rows[0])
    for episode, rows in zip(loaded.iterate_episodes(), episode_rows, strict=True):
        np.testing.assert_array_equal(episode.actions, made.columns["action"][rows])
        np.testing.assert_array_equal(episode.observations[1:], made.columns["next_obs"][rows])
    assert loaded.storage.metadata["ref_min_score"] == -1200.0
    back = copy_dataset(store / "rlpipe" / "pendulum-random-v0", tmp_path / "back")  # and read back from its directory
    assert back.manifest["reference_returns"] == {"random": -1200.0, "expert": -150.0}
    assert back.manifest["episodes"]["return_mean"] == pytest.approx(made.manifest["episodes"]["return_mean"])


def test_a_missing_minari_dataset_is_one_line(store):
    with pytest.raises(DatasetError, match="cannot read Minari dataset minari:nobody/nothing-v0"):
        read_minari("minari:nobody/nothing-v0")
