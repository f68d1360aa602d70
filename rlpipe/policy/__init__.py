"""Policies: how actions are chosen and how the networks learn."""
from rlpipe.policy.base import Policy, PolicyMode
from rlpipe.policy.c51 import C51Policy, c51_loss, categorical_projection
from rlpipe.policy.crossq import CrossQPolicy
from rlpipe.policy.distributional import DistributionalQPolicy
from rlpipe.policy.dqn import DQNPolicy, dqn_td_loss
from rlpipe.policy.frame import PolicyFrame
from rlpipe.policy.q_learning import QLearningPolicy
from rlpipe.policy.qrdqn import QRDQNPolicy, quantile_huber_loss
from rlpipe.policy.sac import SACPolicy, sac_actor_loss, sac_alpha_loss, sac_critic_loss, sac_td_target
from rlpipe.policy.td3 import DDPGPolicy, TD3Policy, td3_actor_loss, td3_critic_loss, td3_target_action, td3_td_target

__all__ = [
    "C51Policy",
    "CrossQPolicy",
    "DDPGPolicy",
    "DQNPolicy",
    "DistributionalQPolicy",
    "Policy",
    "PolicyFrame",
    "PolicyMode",
    "QLearningPolicy",
    "QRDQNPolicy",
    "SACPolicy",
    "TD3Policy",
    "c51_loss",
    "categorical_projection",
    "dqn_td_loss",
    "quantile_huber_loss",
    "sac_actor_loss",
    "sac_alpha_loss",
    "sac_critic_loss",
    "sac_td_target",
    "td3_actor_loss",
    "td3_critic_loss",
    "td3_target_action",
    "td3_td_target",
]
