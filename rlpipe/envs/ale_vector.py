"""ale-py's native vector env (``AtariVectorEnv``, C++ threads) as a vector backend.

:class:`AleVectorEnv` steps ``num_envs`` Atari games with the preprocessing done in C++ and, inside
the wrappers every backend gets (:mod:`rlpipe.envs.vector_wrappers`), gives the same transitions
as gymnasium's vector envs over :func:`~rlpipe.envs.atari.make_atari_env` envs: ``uint8 [4, 84,
84]`` stacks (zero-padded at an episode's start), same-step auto-reset with ``next_obs`` holding an
ended episode's last stack, ``terminated`` and ``truncated`` apart, and in training a lost life
ending the episode (not the game) and rewards clipped to [-1, 1].

ale-py's own ``episodic_life`` resets the whole game at every lost life (DQN's episodic life goes
on with the game) and its ``life_loss_info`` keeps the frame stack across the lost life, so the
game runs with neither and reports its lives: :class:`~rlpipe.envs.vector_wrappers.LifeLossEpisodes`
does the rest for both backends; rewards are clipped by
:class:`~rlpipe.envs.vector_wrappers.ClipRewards`, for episode figures of one definition.

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
from rlpipe.envs.protocol import CoreStep

__all__ = ["AleVectorEnv"]


class AleVectorEnv:
    """``num_envs`` ALE games stepped together by ale-py's C++ vector env, with same-step auto-reset:
    a :class:`~rlpipe.envs.protocol.CoreVectorEnv` (its training envs get their life-loss episodes
    and clipped rewards from :mod:`rlpipe.envs.vector_wrappers`, as the Python path does).

    ``settings`` as for :func:`~rlpipe.envs.atari.make_atari_env`. ``num_threads``: ale-py's worker
    threads (0: one per env, up to the CPU count). Games are seeded ``seed, seed+1, ...`` at reset.
    """

    def __init__(self, env_id: str, num_envs: int, *, settings: AtariSettings | None = None,
                 num_threads: int = 0) -> None:
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
        self.num_envs = num_envs
        self.observation_space: gym.Space = self._env.single_observation_space
        self.action_space: gym.Space = self._env.single_action_space
        self._no_failure = np.zeros(num_envs, dtype=bool)  # the games run in-process and do not fail

    def reset(self, seed: int | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        """New games in every env: seeded ``seed, seed+1, ...`` (ale-py seeds each game itself), or
        without ``seed`` going on with each game's random stream."""
        return self._env.reset(seed=seed)

    def reset_envs(self, mask: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
        """New games in the envs of ``mask`` (ale-py's ``reset_mask``)."""
        return self._env.reset(options={"reset_mask": mask})

    def step(self, action: np.ndarray) -> CoreStep:
        """Step every game once; ended games' last stacks come from ale-py's ``final_obs``."""
        next_obs, reward, terminated, truncated, info = self._env.step(np.asarray(action).astype(np.int64, copy=False))
        over = (terminated | truncated).nonzero()[0]
        final_obs = next_obs
        if len(over):
            final_obs = next_obs.copy()
            for row in over.tolist():
                final_obs[row] = info["final_obs"][row]
        return CoreStep(next_obs, final_obs, reward.astype(np.float32), terminated, truncated, self._no_failure,
                        lives=info["lives"])

    def close(self) -> None:
        self._env.close()
