"""POPGym (Morad et al. 2023): partially observable tasks for agents with memory, the optional
``popgym`` extra, imported on demand.

Importing ``popgym`` registers its envs with gymnasium as ``popgym-<Task><Difficulty>-v0``
(``popgym-RepeatPreviousEasy-v0``); gymnasium 1.x loads no plugins, so rlpipe imports it for
those ids. Its observations are Box, Discrete and MultiDiscrete spaces, which rlpipe's encoders
take as they are; each episode's rewards sum to at most 1.
"""
from __future__ import annotations

from rlpipe.envs.families import EnvFamily, install_hint
from rlpipe.errors import MissingDependencyError

POPGYM_ID_PREFIXES = ("popgym-",)
"""The ids importing ``popgym`` registers."""

__all__ = ["POPGYM_FAMILY", "POPGYM_ID_PREFIXES", "import_popgym"]


def import_popgym(env_id: str) -> None:
    """Import ``popgym`` so that its envs are in ``gym.registry``; without it, one line naming the extra."""
    try:
        import popgym  # noqa: F401 (registers the envs)
    except ImportError:
        raise MissingDependencyError(
            f"env '{env_id}' needs the popgym package, which is not installed: {install_hint('popgym')}"
        ) from None


POPGYM_FAMILY = EnvFamily("popgym", POPGYM_ID_PREFIXES, extra="popgym", importer=import_popgym)
"""POPGym's memory tasks: gymnasium envs, made and wrapped as any other."""
