"""Policies: how actions are chosen and how the networks learn."""
from rlpipe.policy.base import Policy, PolicyMode
from rlpipe.policy.dqn import DQNPolicy, dqn_td_loss

__all__ = ["DQNPolicy", "Policy", "PolicyMode", "dqn_td_loss"]
