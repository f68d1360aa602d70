"""Gymnasium-Robotics (Fetch, PointMaze, ...): the optional ``robotics`` extra, imported on demand.

Gymnasium 1.x loads no plugins, so ``gym.make("FetchReach-v4")`` works only once
``gymnasium_robotics`` is imported and its envs registered. Its 1.4.2 release fails at
``gym.make`` with mujoco >= 3.13 (4.0.1 included), and its Fetch envs were checked here with
3.10; the extra pins ``mujoco>=3.2,<3.11`` and :func:`import_robotics` refuses another mujoco
with one line instead of a traceback from inside the package.
"""
from __future__ import annotations

import contextlib
import io

from rlpipe.envs.families import EnvFamily, install_hint
from rlpipe.errors import MissingDependencyError

ROBOTICS_ID_PREFIXES = ("Fetch", "HandManipulate", "HandReach", "AdroitHand", "PointMaze_", "AntMaze_",
                        "FrankaKitchen")
"""Env id prefixes of Gymnasium-Robotics' environments."""
MUJOCO_RANGE = ((3, 2), (3, 11))
"""The mujoco versions (from, up to but excluding; major.minor) the robotics envs work with."""
INSTALL_HINT = install_hint("robotics")

__all__ = ["MUJOCO_RANGE", "ROBOTICS_FAMILY", "ROBOTICS_ID_PREFIXES", "check_mujoco_version", "import_robotics"]


def check_mujoco_version(version: str, env_id: str) -> None:
    """A one-line :class:`MissingDependencyError` when mujoco ``version`` is outside :data:`MUJOCO_RANGE`."""
    major_minor = tuple(int(part) for part in version.split(".")[:2] if part.isdigit())
    low, high = MUJOCO_RANGE
    if not low <= major_minor < high:
        raise MissingDependencyError(
            f"env '{env_id}' needs mujoco>={'.'.join(map(str, low))},<{'.'.join(map(str, high))} "
            f"(gymnasium-robotics 1.4 fails with newer ones); mujoco {version} is installed: {INSTALL_HINT}"
        )


def import_robotics(env_id: str) -> None:
    """Import ``gymnasium_robotics`` and register its envs; ``env_id`` is for the messages.

    Without the package, or with a mujoco it does not work with: a one-line
    :class:`MissingDependencyError` naming the extra to install.
    """
    try:
        import mujoco
    except ImportError:
        raise MissingDependencyError(f"env '{env_id}' needs mujoco and gymnasium-robotics: {INSTALL_HINT}") from None
    check_mujoco_version(mujoco.__version__, env_id)
    try:
        # the package prints notices about envs of other families to stderr at import
        with contextlib.redirect_stderr(io.StringIO()):
            import gymnasium_robotics
    except ImportError:
        raise MissingDependencyError(f"env '{env_id}' needs the gymnasium-robotics package: {INSTALL_HINT}") from None
    import gymnasium as gym

    gym.register_envs(gymnasium_robotics)


ROBOTICS_FAMILY = EnvFamily("robotics", ROBOTICS_ID_PREFIXES, extra="robotics", importer=import_robotics)
"""Gymnasium-Robotics' goal envs (flattened by the goal wrappers, decided on their spaces)."""
