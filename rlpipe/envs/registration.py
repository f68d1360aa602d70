"""Registers rlpipe's own environments with gymnasium (idempotent)."""
from __future__ import annotations

from rlpipe.envs.bitflip import register_envs as register_bitflip


def register_envs() -> None:
    """Make rlpipe's environments available to ``gym.make``."""
    register_bitflip()
