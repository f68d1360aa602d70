"""Reward models: rewrite the rewards of training data (HER goal relabelling, RND and ICM bonuses)."""

from rlpipe.reward_model.base import BaseRewardModel
from rlpipe.reward_model.her import (
    HER_STRATEGIES,
    HerRewardModel,
    equal_goal_reward,
    merge_state_goal,
    split_state_goal,
)
from rlpipe.reward_model.icm import IcmRewardModel
from rlpipe.reward_model.intrinsic import IntrinsicRewardModel
from rlpipe.reward_model.rnd import RndRewardModel
from rlpipe.utils.running_stats import RunningMeanStd

__all__ = [
    "HER_STRATEGIES",
    "BaseRewardModel",
    "HerRewardModel",
    "IcmRewardModel",
    "IntrinsicRewardModel",
    "RndRewardModel",
    "RunningMeanStd",
    "equal_goal_reward",
    "merge_state_goal",
    "split_state_goal",
]
