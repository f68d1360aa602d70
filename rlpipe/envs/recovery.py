"""Keep collecting when an environment crashes.

:class:`RecreateOnError` wraps one environment. When its ``step`` raises, the broken
instance is dropped, a new one is made from the same factory, and the step is reported as
the end of a *truncated* episode (reward 0, ``next_obs`` = the last good observation, and
``info["env_error"]``), so the transitions collected so far stay valid and none is silently
lost. That placeholder step is not a transition: the vector env flags it
(:data:`~rlpipe.utils.batch.FAILED_STEP`) and the pipeline drops it, ending the episode
at the step before. The next ``reset`` (the vector env's auto-reset) starts an episode in
the new instance. When ``reset`` raises, the instance is replaced the same way and the
reset retried. Making the new instance is tried again with a growing pause (an env
server may be restarting) before the run stops with one line. The first failure is logged;
the others are counted (``recreated``; the vector env counts failed steps), not logged, so a
flaky env does not flood the terminal.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym

from rlpipe.errors import EnvironmentFailedError
from rlpipe.utils.batch import FAILED_STEP

logger = logging.getLogger(__name__)
RECREATE_TRIES = 4
RECREATE_FIRST_PAUSE_S = 0.1
"""Making a replacement env is tried RECREATE_TRIES times, pausing 0.1, 0.2, 0.4 s between."""


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
        log = logger.warning if self.recreated == 0 else logger.debug
        log("environment %s raised %r: recreating it (further failures are counted, not logged)", call, err)
        try:
            self.env.close()
        except Exception:  # closing a broken env may fail too; it is dropped either way
            logger.debug("closing the broken environment failed", exc_info=True)
        self.env = self._make_with_retries()
        self.recreated += 1

    def _make_with_retries(self) -> gym.Env:
        pause = RECREATE_FIRST_PAUSE_S
        for _ in range(RECREATE_TRIES - 1):
            try:
                return self._make_env()
            except Exception:  # a factory may raise anything; try again after a pause
                logger.debug("making the replacement environment failed", exc_info=True)
                time.sleep(pause)
                pause *= 2
        try:
            return self._make_env()
        except Exception as err:
            raise EnvironmentFailedError(
                f"the environment could not be made again after it failed ({RECREATE_TRIES} tries; last error: {err!r})"
            ) from None
