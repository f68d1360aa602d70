"""ale-py's native vector env (``AtariVectorEnv``, C++ threads) behind :class:`VectorEnvManager`'s interface.

:class:`AleVectorEnv` steps ``num_envs`` Atari games with the preprocessing done in C++ and gives
the same transitions as :class:`~rlpipe.envs.vector.VectorEnvManager` over
:func:`~rlpipe.envs.atari.make_atari_env` envs: ``uint8 [4, 84, 84]`` stacks (zero-padded at
an episode's start), same-step auto-reset with ``next_obs`` holding an ended episode's last
stack, ``terminated`` and ``truncated`` apart, and in training a lost life ends the episode
(not the game) and rewards are clipped to [-1, 1].

Two parts are done here rather than in ale-py: its ``episodic_life`` resets the whole game at
every lost life (DQN's episodic life goes on with the game), and its ``life_loss_info`` keeps the
frame stack across the lost life. So the game runs with neither; the adapter marks a lost life
``terminated`` from ``info["lives"]`` and zero-pads the stack after it for the next three steps,
as :class:`~rlpipe.envs.atari.EpisodicLife` under a frame stack does. Rewards are clipped here
too, for the same reason as in the Python path: episode figures of one definition.

Where the two backends differ (a test documents each): ale-py seeds each game's emulator and
no-op draws with ``seed + i`` itself, where gymnasium's ALE env derives both from the seed
through a ``SeedSequence``, and ale-py takes 0 to ``noop_max - 1`` no-op frames (one fewer
after ``FIRE``) where ``AtariPreprocessing`` takes 1 to ``noop_max``. So with sticky actions
or no-ops the two start different (equally random) games from one seed; without both they
give identical transitions. Both count the step limit from the end of the no-ops, but at the
limit ale-py stops the step's frames before it reads the last frame's screen: the newest frame
of a truncated episode's last stack is then older than the Python path's.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from rlpipe.envs.atari import FRAME_SKIP, FRAME_STACK, SCREEN_SIZE, AtariSettings, atari_game
from rlpipe.envs.episode_stats import EpisodeStats, FinishedEpisode
from rlpipe.utils.batch import FAILED_STEP

__all__ = ["AleVectorEnv"]


class AleVectorEnv:
    """``num_envs`` ALE games stepped together by ale-py's C++ vector env, with same-step auto-reset.

    ``train``: a lost life ends the episode and rewards are clipped (see the module);
    ``settings`` as for :func:`~rlpipe.envs.atari.make_atari_env`. ``num_threads``: ale-py's
    worker threads (0: one per env, up to the CPU count). Envs are seeded ``seed, seed+1, ...``.
    """

    def __init__(
        self,
        env_id: str,
        num_envs: int,
        seed: int = 0,
        *,
        train: bool,
        settings: AtariSettings | None = None,
        num_threads: int = 0,
    ) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        settings = settings or AtariSettings()
        game = atari_game(env_id)  # imports ale-py, or one line naming the extra
        from ale_py.vector_env import AtariVectorEnv

        self._env = AtariVectorEnv(
            game,
            num_envs,
            num_threads=num_threads,
            repeat_action_probability=settings.repeat_action_probability,
            full_action_space=settings.full_action_space,
            max_num_frames_per_episode=settings.max_episode_steps * FRAME_SKIP,
            autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
            img_height=SCREEN_SIZE,
            img_width=SCREEN_SIZE,
            stack_num=FRAME_STACK,
            frameskip=FRAME_SKIP,
            noop_max=settings.noop_max,
            use_fire_reset=True,
            episodic_life=False,
            life_loss_info=False,
            reward_clipping=False,
        )
        self._train = train
        self.num_envs = num_envs
        self.observation_space: gym.Space = self._env.single_observation_space
        self.action_space: gym.Space = self._env.single_action_space
        self.action_space.seed(seed)
        self.obs: np.ndarray = np.empty(0)
        self.env_id = np.arange(num_envs, dtype=np.int64)
        self.vector_steps = 0
        self.failed_steps = 0
        """Always 0: the games run in-process and do not fail; kept for the collector's figures."""
        self.restarts = 0
        self.episode_stats = EpisodeStats(num_envs)
        """Return and length of the latest finished episodes (per life and clipped with ``train``, as
        :class:`~rlpipe.envs.vector.VectorEnvManager` reports them for the Python path)."""
        self.finished_episodes: list[FinishedEpisode] = []
        self._lives = np.zeros(num_envs, dtype=np.int32)
        self._age = np.ones(num_envs, dtype=np.int64)  # frames in each env's stack since its episode began
        self._no_failure = np.zeros(num_envs, dtype=bool)
        self.reset(seed)

    def reset(self, seed: int | None = None) -> np.ndarray:
        """Start new games in every env: seeded ``seed, seed+1, ...``, or without ``seed`` going on
        with each game's random stream."""
        self.obs, info = self._env.reset(seed=seed)
        self._lives = info["lives"]
        self._age[:] = 1
        self.episode_stats.restart()
        return self.obs

    def random_actions(self) -> np.ndarray:
        """One uniformly random action per env."""
        return np.stack([self.action_space.sample() for _ in range(self.num_envs)])

    def step(self, action: np.ndarray) -> dict[str, np.ndarray]:
        """Step every game once; return the transitions as the columnar batch of ``VectorEnvManager.step``."""
        action, obs = np.asarray(action), self.obs
        next_obs, raw_reward, terminated, truncated, info = self._env.step(action.astype(np.int64, copy=False))
        game_over = terminated | truncated
        reward = raw_reward.astype(np.float32)
        life_lost = self._life_lost(info["lives"], game_over)
        if self._train:
            terminated = terminated | life_lost
            np.clip(reward, -1.0, 1.0, out=reward)
        ended = terminated | truncated
        self._age += 1
        final_next_obs = self._final_stacks(next_obs, info, game_over)
        self.obs = self._start_stacks(final_next_obs, next_obs, game_over, life_lost)
        self._age[ended] = 1
        self.vector_steps += 1
        self.finished_episodes = self.episode_stats.add(reward, ended)
        return {
            "obs": obs,
            "action": action,
            "reward": reward,
            "next_obs": final_next_obs,
            "terminated": terminated,
            "truncated": truncated,
            "env_id": self.env_id,
            FAILED_STEP: self._no_failure,
        }

    def _life_lost(self, lives: np.ndarray, game_over: np.ndarray) -> np.ndarray:
        """Which games lost a life but go on (as :class:`~rlpipe.envs.atari.EpisodicLife` decides);
        ``lives`` of ended games are those of the new game."""
        lost = (lives > 0) & (lives < self._lives) & ~game_over
        self._lives = lives
        return lost if self._train else np.zeros_like(lost)

    def _final_stacks(self, next_obs: np.ndarray, info: dict[str, Any], game_over: np.ndarray) -> np.ndarray:
        """Each env's stack after this step in its episode: ended games' last stacks (ale-py's
        ``final_obs``), and the frames from before a lost life zeroed while they are still in the
        stack (ale-py's own stack goes on across the lost life)."""
        young = (self._age < FRAME_STACK).nonzero()[0]
        over = game_over.nonzero()[0]
        if not len(over) and not len(young):
            return next_obs
        stacks = next_obs.copy()
        for row in over.tolist():
            stacks[row] = info["final_obs"][row]
        for row in young.tolist():
            stacks[row, : FRAME_STACK - self._age[row]] = 0
        return stacks

    def _start_stacks(self, final: np.ndarray, next_obs: np.ndarray, game_over: np.ndarray,
                      life_lost: np.ndarray) -> np.ndarray:
        """The stacks the next step starts from: ``final`` but, where a game ended, ale-py's new game,
        and where a life was lost (training), a fresh stack of the current frame alone."""
        if not game_over.any() and not life_lost.any():
            return final
        stacks = final.copy()
        stacks[game_over] = next_obs[game_over]
        stacks[life_lost, :-1] = 0
        return stacks

    def close(self) -> None:
        self._env.close()

    def __enter__(self) -> AleVectorEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
