"""Keep collecting when an environment crashes.

:class:`RecreateOnError` wraps one environment. When its ``step`` raises, the broken
instance is dropped, a new one is made from the same factory, and the step is reported as
the end of a *truncated* episode (reward 0, ``next_obs`` = the last good observation, and
``info["env_error"]``), so the transitions collected so far stay valid and none is silently
lost. That placeholder step is not a transition: the vector env flags it
(:data:`~rlpipe.utils.batch.FAILED_STEP`) and the pipeline drops it, ending the episode
at the step before. The next ``reset`` (the vector env's auto-reset) starts an episode in
the new instance. When ``reset`` raises, the instance is replaced the same way and the
reset retried.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import gymnasium as gym

from rlpipe.errors import EnvironmentFailedError
from rlpipe.utils.batch import FAILED_STEP

logger = logging.getLogger(__name__)


class RecreateOnError(gym.Wrapper):
    """Recreate the wrapped environment when ``step`` or ``reset`` raises.

    A failed step ends its episode as truncated; a failed reset is retried on the new
    instance. ``max_consecutive_errors`` failures with no good step between stop the run.
    """

    def __init__(self, make_env: Callable[[], gym.Env], max_consecutive_errors: int = 3) -> None:
        super().__init__(make_env())
        self._make_env = make_env
        self._max_consecutive_errors = max_consecutive_errors
        self._consecutive_errors = 0
        self._last_obs: Any = None
        self.recreated = 0

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        while True:
            try:
                obs, info = self.env.reset(**kwargs)
            except Exception as err:  # as in step: recreate, then try again
                self._replace_env(err, "reset")
                continue
            self._last_obs = obs  # a good reset does not clear the error count: only a good step does
            return obs, info

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        try:
            result = self.env.step(action)
        except Exception as err:  # an env may raise anything; the run must go on
            self._replace_env(err, "step")
            return self._last_obs, 0.0, False, True, {FAILED_STEP: repr(err)}
        self._consecutive_errors = 0
        self._last_obs = result[0]
        return result

    def _replace_env(self, err: Exception, call: str) -> None:
        """Count the failure (EnvironmentFailedError after too many in a row), then recreate the env."""
        self._consecutive_errors += 1
        if self._consecutive_errors > self._max_consecutive_errors:
            raise EnvironmentFailedError(
                f"environment {self.env.spec.id if self.env.spec else self.env} failed "
                f"{self._consecutive_errors} times in a row (last error: {err!r})"
            ) from err
        logger.warning("environment %s raised %r: recreating it", call, err)
        try:
            self.env.close()
        except Exception:  # closing a broken env may fail too; it is dropped either way
            logger.debug("closing the broken environment failed", exc_info=True)
        self.env = self._make_env()
        self.recreated += 1
