"""The env layer's own errors, worded in its own terms (an env id, a wrapper, the env's kwargs).

The env layer knows nothing of config files: an :class:`EnvSettingError` names the setting of
the env description that is wrong (an argument of :func:`~rlpipe.envs.factory.env_factory` or a
field of :class:`~rlpipe.envs.backends.EnvSettings`), and :mod:`rlpipe.recipes.envs` turns that
setting into the config key a user writes (``env_id`` -> ``env.env_id``).
"""
from __future__ import annotations

from rlpipe.errors import RlpipeError

__all__ = ["EnvError", "EnvSettingError"]


class EnvError(RlpipeError):
    """An environment cannot be made as described."""


class EnvSettingError(EnvError, ValueError):
    """One setting of an env description is wrong.

    ``setting`` names it as the env layer does: ``env_id``, ``env_kwargs``, ``imports``,
    ``wrappers[i].type``, ``wrappers[i]`` or ``backend``; ``reason`` says what is wrong with it.
    """

    def __init__(self, reason: str, setting: str = "") -> None:
        super().__init__(f"{setting}: {reason}" if setting else reason)
        self.reason = reason
        self.setting = setting

    def __reduce__(self) -> tuple[type[EnvSettingError], tuple[str, str]]:
        """Pickle with both fields (an env made in a subprocess hands its errors back pickled)."""
        return type(self), (self.reason, self.setting)
