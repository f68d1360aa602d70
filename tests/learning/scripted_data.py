"""Datasets played by hand-written controllers, for the offline learning tests: quick to make (no
training), deterministic for a seed, and narrow (one action per state, or nearly), which is what
makes plain off-policy learning fail offline."""
from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np

from rlpipe.data.dataset import COLUMNS, Dataset, write_dataset


def _play(env_id: str, act, episodes: int, seed: int, num_envs: int = 8) -> dict[str, np.ndarray]:
    """Rows of ``episodes`` episodes of ``act(obs, rng)`` on ``num_envs`` envs (the real last observation of
    each episode as its ``next_obs``)."""
    env = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="sync",
                       vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP})
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    rows: dict[str, list[np.ndarray]] = {name: [] for name in COLUMNS}
    finished = 0
    while finished < episodes:
        action = act(obs, rng)
        next_obs, reward, terminated, truncated, info = env.step(action)
        done = terminated | truncated
        real_next = next_obs.copy()
        if done.any():
            real_next[done] = np.stack(info["final_obs"][done])
        for name, value in zip(COLUMNS, (obs, action, reward, real_next, terminated, truncated,
                                         np.arange(num_envs)), strict=True):
            rows[name].append(np.asarray(value))
        finished += int(done.sum())
        obs = next_obs
    env.close()
    return {name: np.concatenate(values) for name, values in rows.items()}


def cartpole_dataset(path: Path, eps: float = 0.3, episodes: int = 30, seed: int = 0) -> Dataset:
    """CartPole played by ``push toward where the pole falls`` (angle + 0.3 x angular velocity), with a
    random action at probability ``eps``: a mean return of about 390."""
    def act(obs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        greedy = (obs[:, 2] + 0.3 * obs[:, 3] > 0).astype(np.int64)
        return np.where(rng.random(len(obs)) < eps, rng.integers(0, 2, len(obs)), greedy)

    env = gym.make("CartPole-v1")
    return write_dataset(path, _play("CartPole-v1", act, episodes, seed, num_envs=4), env.observation_space,
                         env.action_space, "CartPole-v1", {"source": "scripted", "eps": eps})


def pendulum_dataset(path: Path, episodes: int = 40, seed: int = 0) -> Dataset:
    """Pendulum played by a weak swing-up (half torque while pumping energy, a soft stabiliser near the
    top), without noise: a mean return of about -910 (random play: about -1200, the best: about -150).
    Actions are in rlpipe's [-1, 1]."""
    def act(obs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        cos, sin, speed = obs[:, 0], obs[:, 1], obs[:, 2]
        angle = np.arctan2(sin, cos)
        pump = np.where(0.5 * speed**2 + 10.0 * (cos - 1.0) < 0, 1.0, -1.0) * np.sign(speed + 1e-6)
        torque = np.where(cos > 0.8, -(5.0 * angle + speed), pump)
        return np.clip(torque / 2.0, -1.0, 1.0)[:, None].astype(np.float32)

    rows = _play("Pendulum-v1", lambda obs, rng: act(obs, rng) * 2.0, episodes, seed)  # the env takes [-2, 2]
    rows["action"] = (rows["action"] / 2.0).astype(np.float32)
    env = gym.make("Pendulum-v1")
    return write_dataset(path, rows, env.observation_space, gym.spaces.Box(-1.0, 1.0, (1,), np.float32),
                         "Pendulum-v1", {"source": "scripted"})
