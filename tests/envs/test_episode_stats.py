"""Training-episode figures of a vector env: return, length and success over the last 100 episodes."""
from __future__ import annotations

import numpy as np

from rlpipe.envs import VectorEnvManager, env_factory
from rlpipe.envs.episode_stats import WINDOW, EpisodeStats, FinishedEpisode, final_success
from rlpipe.framework.middleware import evaluate_episodes


def test_episodes_are_summed_per_env_and_reported_when_they_end():
    stats = EpisodeStats(2)
    assert stats.summary() == {}
    assert stats.add(np.array([1.0, 2.0]), np.array([False, False])) == []
    ended = stats.add(np.array([1.0, 2.0]), np.array([False, True]), success=np.array([True]))
    assert ended == [FinishedEpisode(env=1, episode_return=4.0, length=2, success=True)]
    stats.add(np.array([1.0, 5.0]), np.array([True, True]), success=np.array([False, False]))
    assert stats.summary() == {"episode_return_mean": (4.0 + 3.0 + 5.0) / 3, "episode_length_mean": (2 + 3 + 1) / 3,
                               "success_rate": 1 / 3}
    assert stats.episodes == 3


def test_a_restart_forgets_the_running_episodes_but_not_the_finished_ones():
    stats = EpisodeStats(2)
    stats.add(np.array([1.0, 1.0]), np.array([False, True]))
    stats.add(np.array([1.0, 1.0]), np.array([False, False]))
    stats.restart()
    ended = stats.add(np.array([2.0, 3.0]), np.array([True, True]))
    assert [(e.env, e.episode_return, e.length) for e in ended] == [(0, 2.0, 1), (1, 3.0, 1)]
    assert stats.episodes == 3 and stats.summary()["episode_length_mean"] == 1.0


def test_success_rate_only_when_every_episode_in_the_window_reported_it():
    stats = EpisodeStats(1)
    stats.add(np.array([1.0]), np.array([True]))  # no is_success
    stats.add(np.array([1.0]), np.array([True]), success=np.array([True]))
    assert "success_rate" not in stats.summary()


def test_the_window_keeps_the_latest_episodes():
    stats = EpisodeStats(1)
    for k in range(WINDOW + 20):
        stats.add(np.array([float(k)]), np.array([True]))
    assert stats.summary()["episode_return_mean"] == np.mean(np.arange(20, WINDOW + 20))


def test_final_success_reads_gymnasiums_same_step_final_info():
    info = {"final_info": {"is_success": np.array([False, True, True]), "_is_success": np.array([False, True, True])}}
    assert final_success(info, np.array([1, 2])).tolist() == [True, True]
    assert final_success(info, np.array([0, 1])) is None  # env 0 did not report
    assert final_success({}, np.array([0])) is None


def test_the_vector_env_counts_bitflip_successes_and_the_evaluator_reports_them():
    env = VectorEnvManager(env_factory("rlpipe/BitFlip-v0", {"n_bits": 2}), num_envs=3, seed=0)
    for _ in range(20):
        env.step(env.random_actions())
    summary = env.episode_stats.summary()
    assert 0.0 < summary["success_rate"] <= 1.0 and summary["episode_length_mean"] <= 2

    class Random:
        def forward(self, obs):
            return env.random_actions()

    out = evaluate_episodes(Random(), env, 6)
    assert out["episode_success"].dtype == bool and len(out["episode_success"]) == 6
    np.testing.assert_array_equal(out["episode_success"], out["episode_return"] > 0)  # reward 1 only on success
    env.close()
