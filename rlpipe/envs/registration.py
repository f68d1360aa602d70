"""Registers rlpipe's own environments with gymnasium (idempotent)."""
from __future__ import annotations


def register_envs() -> None:
    """Make rlpipe's environments available to ``gym.make``."""
    try:
        from rlpipe.envs.bitflip import register_envs as register_bitflip
    except ImportError:  # bit flip not built yet in this checkout
        return
    register_bitflip()
