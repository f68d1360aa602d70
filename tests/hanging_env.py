"""Environments whose ``step`` hangs (for the tests of ``env.step_timeout``): importing this module
registers ``HangingCartPole-v0``, whose every step hangs, and ``LateHangingCartPole-v0``, whose
first step of each episode returns and whose second hangs."""
from __future__ import annotations

import time
from typing import Any

import gymnasium as gym
from gymnasium.envs.classic_control import CartPoleEnv

HANG_S = 3600.0


class HangingCartPole(CartPoleEnv):
    """CartPole whose steps from the ``hang_at``-th of each episode on never return (within an hour)."""

    def __init__(self, hang_at: int = 1, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.hang_at = hang_at
        self.t = 0

    def reset(self, **kwargs: Any) -> Any:
        self.t = 0
        return super().reset(**kwargs)

    def step(self, action: Any) -> Any:
        self.t += 1
        if self.t >= self.hang_at:
            time.sleep(HANG_S)
        return super().step(action)


for env_id, hang_at in (("HangingCartPole-v0", 1), ("LateHangingCartPole-v0", 2)):
    if env_id not in gym.registry:
        gym.register(env_id, entry_point=HangingCartPole, kwargs={"hang_at": hang_at}, max_episode_steps=500)
