"""Reward models: rewrite the rewards of training data (HER goal relabelling, ...)."""

from rlpipe.reward_model.base import BaseRewardModel
from rlpipe.reward_model.her import (
    HER_STRATEGIES,
    HerRewardModel,
    equal_goal_reward,
    merge_state_goal,
    split_state_goal,
)

__all__ = [
    "HER_STRATEGIES",
    "BaseRewardModel",
    "HerRewardModel",
    "equal_goal_reward",
    "merge_state_goal",
    "split_state_goal",
]
