"""What every vector backend needs, written once: wrappers around a :class:`CoreVectorEnv`.

A backend (:mod:`rlpipe.envs.vector` over gymnasium's vector envs, :mod:`rlpipe.envs.ale_vector`
over ale-py's) only steps and resets its environments, with same-step auto-reset. Around it:

- :class:`LifeLossEpisodes` (an ALE game's training envs): a lost life ends the episode, not the
  game; the frames from before it leave the frame stacks;
- :class:`ClipRewards` (the same envs): rewards clipped to [-1, 1];
- :class:`NonFiniteCheck`: a NaN or infinity in an action, reward or observation raises, is
  logged, or ends its episode as a failed step (``env.nonfinite``);
- :class:`TransitionBatches`, outermost: the :class:`~rlpipe.envs.protocol.VectorEnv` the
  pipeline steps: one columnar batch per step (``obs`` the step acted on, ``next_obs`` an ended
  episode's real last observation), the episodes' return, length and success, failed steps counted.

SB3's ``VecEnvWrapper``s (``VecMonitor``, ``VecCheckNan``) are the model: a backend written once
gets every one of them.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import gymnasium as gym
import numpy as np

from rlpipe.envs.episode_stats import EpisodeStats, FinishedEpisode
from rlpipe.envs.nonfinite import NonFiniteGuard
from rlpipe.envs.protocol import CoreStep, CoreVectorEnv
from rlpipe.utils.batch import FAILED_STEP

__all__ = ["ClipRewards", "CoreWrapper", "LifeLossEpisodes", "NonFiniteCheck", "TransitionBatches"]


class _AroundCore:
    """Something around a core (``self.env``): closing it, reaching the backend inside every
    wrapper, and reading the core's own figures (``restarts``, ``nonfinite``) through it."""

    env: CoreVectorEnv

    def close(self) -> None:
        self.env.close()

    @property
    def unwrapped(self) -> CoreVectorEnv:
        """The backend inside every wrapper."""
        return getattr(self.env, "unwrapped", self.env)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)


class CoreWrapper(_AroundCore):
    """A :class:`CoreVectorEnv` around another, passing on what it does not change (counters
    such as ``restarts`` included)."""

    def __init__(self, env: CoreVectorEnv) -> None:
        self.env = env

    @property
    def num_envs(self) -> int:
        return self.env.num_envs

    @property
    def observation_space(self) -> gym.Space:
        return self.env.observation_space

    @property
    def action_space(self) -> gym.Space:
        return self.env.action_space

    def reset(self, seed: int | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        return self.env.reset(seed)

    def reset_envs(self, mask: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
        return self.env.reset_envs(mask)

    def step(self, action: np.ndarray) -> CoreStep:
        return self.env.step(action)


class LifeLossEpisodes(CoreWrapper):
    """A lost life ends a training episode (``terminated``) but not the game: DQN's episodic life
    (Mnih et al. 2015), as Dopamine does it. The episode that follows starts from the frame the
    game is at, with the frames from before the loss zeroed in the stacks of ``stack`` frames
    (axis 1) while they are still in them, as a frame stack reset at that point would hold.

    A life counts as lost when ``lives`` (the backend's, per env) drops and stays above zero in a
    game that goes on (some games show 0 lives for a few frames before they end).
    """

    def __init__(self, env: CoreVectorEnv, stack: int) -> None:
        super().__init__(env)
        self._stack = stack
        self._lives = np.zeros(env.num_envs, dtype=np.int64)
        self._age = np.ones(env.num_envs, dtype=np.int64)  # frames in each env's stack since its episode began

    def reset(self, seed: int | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        obs, info = self.env.reset(seed)
        self._lives = np.asarray(info["lives"], dtype=np.int64).copy()
        self._age[:] = 1
        return obs, info

    def reset_envs(self, mask: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
        obs, info = self.env.reset_envs(mask)
        self._lives[mask] = np.asarray(info["lives"])[mask]
        self._age[mask] = 1
        return obs, info

    def step(self, action: np.ndarray) -> CoreStep:
        step = self.env.step(action)
        if step.lives is None:
            raise ValueError("LifeLossEpisodes needs a backend that reports each env's lives")
        game_over = step.terminated | step.truncated
        lost = (step.lives > 0) & (step.lives < self._lives) & ~game_over  # ended games report the new game's
        self._lives = np.asarray(step.lives, dtype=np.int64).copy()
        self._age += 1
        final_obs = self._zero_older(step.final_obs)
        next_obs = final_obs
        if game_over.any() or lost.any():  # the stacks the next step starts from
            next_obs = final_obs.copy()
            next_obs[game_over] = step.next_obs[game_over]  # a new game: the backend's fresh stack
            next_obs[lost, :-1] = 0  # a lost life: the current frame alone
        self._age[game_over | lost] = 1
        return replace(step, next_obs=next_obs, final_obs=final_obs, terminated=step.terminated | lost)

    def _zero_older(self, stacks: np.ndarray) -> np.ndarray:
        """``stacks`` with, in each env whose episode began less than a stack ago, the frames from before it zeroed."""
        young = (self._age < self._stack).nonzero()[0]
        if not len(young):
            return stacks
        stacks = stacks.copy()
        for row in young.tolist():
            stacks[row, : self._stack - self._age[row]] = 0
        return stacks


class ClipRewards(CoreWrapper):
    """Rewards clipped to ``[low, high]`` (an ALE game's training envs: [-1, 1])."""

    def __init__(self, env: CoreVectorEnv, low: float = -1.0, high: float = 1.0) -> None:
        super().__init__(env)
        self._low, self._high = low, high

    def step(self, action: np.ndarray) -> CoreStep:
        step = self.env.step(action)
        return replace(step, reward=np.clip(step.reward, self._low, self._high))


class NonFiniteCheck(CoreWrapper):
    """Every action, reward and observation checked for NaN and infinity (:mod:`rlpipe.envs.nonfinite`):
    ``raise`` stops with one line, ``warn`` logs and goes on, ``skip`` turns the step into a failed one
    (reward 0, the episode truncated there, a new episode started in that env)."""

    def __init__(self, env: CoreVectorEnv, reaction: str = "raise") -> None:
        super().__init__(env)
        self.nonfinite = NonFiniteGuard(reaction)
        """The check itself (``nonfinite.caught`` counts what it found)."""
        self._steps = 0

    def step(self, action: np.ndarray) -> CoreStep:
        self.nonfinite.check_action(self._steps + 1, action)
        step = self.env.step(action)
        if step.restarted:  # the backend's workers were restarted: no step to check
            return step
        self._steps += 1
        fields = {"reward": step.reward, "next_obs": step.final_obs}
        if step.final_obs is not step.next_obs:  # episodes ended: the new episodes' first observations too
            fields["reset obs"] = step.next_obs
        skip = self.nonfinite.check(self._steps, fields)
        if skip is None:
            return step
        fresh, _ = self.env.reset_envs(skip)
        next_obs = step.next_obs.copy()
        next_obs[skip] = fresh[skip]
        return replace(step, reward=np.where(skip, 0.0, step.reward), next_obs=next_obs,
                       truncated=step.truncated | skip, failed=step.failed | skip, success=None)


class TransitionBatches(_AroundCore):
    """The :class:`~rlpipe.envs.protocol.VectorEnv` over a core: steps as columnar batches (``obs``,
    ``action``, ``reward``, ``next_obs``, ``terminated``, ``truncated``, ``env_id``, ``env_error``),
    the current observation of every env (:attr:`obs`), the finished episodes' figures, and the
    failed steps counted. Random actions come from the single env's action space, seeded with ``seed``;
    the envs are reset with ``seed, seed+1, ...``."""

    def __init__(self, env: CoreVectorEnv, seed: int = 0) -> None:
        self.env = env
        self.num_envs = env.num_envs
        self.observation_space: gym.Space = env.observation_space
        self.action_space: gym.Space = env.action_space
        self.action_space.seed(seed)
        self.obs: np.ndarray = np.empty(0)
        self.env_id = np.arange(self.num_envs, dtype=np.int64)
        self.vector_steps = 0
        self.failed_steps = 0
        """Env steps that failed (the env raised, hung or died, or gave a skipped NaN), counted."""
        self.episode_stats = EpisodeStats(self.num_envs)
        """Return, length and success of the latest finished episodes (see :meth:`EpisodeStats.summary`)."""
        self.finished_episodes: list[FinishedEpisode] = []
        """The episodes the latest :meth:`step` ended, with their return, length and success."""
        self.reset(seed)

    def reset(self, seed: int | None = None) -> np.ndarray:
        """Start fresh episodes in every env: seeded ``seed, seed+1, ...`` when given, else on the
        envs' own random streams (new, yet reproducible, episodes)."""
        self.obs, _ = self.env.reset(seed)
        self.episode_stats.restart()
        return self.obs

    def random_actions(self) -> np.ndarray:
        """One uniformly random action per env."""
        return np.stack([self.action_space.sample() for _ in range(self.num_envs)])

    def step(self, action: np.ndarray) -> dict[str, np.ndarray]:
        """Step every env once; the transitions as a columnar batch. After a restart of the backend's
        workers every row is a failed step and no episode counts as finished (each was cut)."""
        step = self.env.step(action)
        self.failed_steps += int(np.count_nonzero(step.failed))
        if step.restarted:
            self.finished_episodes = []
            self.episode_stats.restart()
        else:
            self.vector_steps += 1
            done = step.terminated | step.truncated
            self.finished_episodes = self.episode_stats.add(step.reward, done, step.success)
        batch = {
            "obs": self.obs,
            "action": np.asarray(action),
            "reward": step.reward.astype(np.float32, copy=False),
            "next_obs": step.final_obs,
            "terminated": step.terminated,
            "truncated": step.truncated,
            "env_id": self.env_id,
            FAILED_STEP: step.failed,
        }
        self.obs = step.next_obs
        return batch

    def __enter__(self) -> TransitionBatches:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
