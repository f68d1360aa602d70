"""Registers rlpipe's own environments with gymnasium (idempotent)."""
from __future__ import annotations

from rlpipe.envs.bitflip import register_envs as register_bitflip
from rlpipe.envs.deepsea import register_envs as register_deepsea


def register_envs() -> None:
    """Make rlpipe's environments available to ``gym.make``."""
    register_bitflip()
    register_deepsea()
