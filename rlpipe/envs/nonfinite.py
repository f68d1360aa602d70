"""NaN and infinity caught where they enter: the actions, rewards and observations of each vector step.

A NaN that reaches the replay buffer poisons every batch it is drawn into, and the first sign
is a diverged loss thousands of updates later, blamed on the learning rate. Checked at the
source (SB3's ``VecCheckNan`` does the same), the step, the env and the field are known.
The reaction (``env.nonfinite``):

- ``raise`` (default): one line naming the env, the field and the step;
- ``warn``: log it (once per field) and go on;
- ``skip``: the step is dropped as a failed step and its episode ends there, truncated (as
  when the env raises), and that env starts a new episode.

Actions are checked before they reach the env, and a bad one always raises: it comes from
the policy (a diverged network), not from the env, so there is no step to skip.
"""
from __future__ import annotations

import logging

import numpy as np

from rlpipe.errors import RlpipeError

NONFINITE_REACTIONS = ("raise", "warn", "skip")
logger = logging.getLogger(__name__)

__all__ = ["NONFINITE_REACTIONS", "NonFiniteError", "NonFiniteGuard"]


class NonFiniteError(RlpipeError, FloatingPointError):
    """An environment step carried a NaN or an infinity (with ``env.nonfinite=raise``)."""


def _bad_rows(values: np.ndarray) -> np.ndarray:
    """Per row (env), whether any entry is NaN or infinite; all False for non-float data."""
    if values.dtype.kind not in "fc":
        return np.zeros(len(values), dtype=bool)
    bad = ~np.isfinite(values)
    return bad.reshape(len(values), -1).any(axis=1) if bad.ndim > 1 else bad


class NonFiniteGuard:
    """Check each vector step; :meth:`check` returns the envs whose step is to be skipped."""

    def __init__(self, reaction: str = "raise") -> None:
        if reaction not in NONFINITE_REACTIONS:
            raise ValueError(f"nonfinite reaction must be one of {NONFINITE_REACTIONS}, got {reaction!r}")
        self.reaction = reaction
        self.caught = 0
        """Steps (env by env) found with a NaN or an infinity so far."""
        self._warned: set[str] = set()

    def check_action(self, step: int, action: np.ndarray) -> None:
        """Raise :class:`NonFiniteError` when an action of vector step ``step`` is NaN or infinite."""
        action = np.asarray(action)
        if action.dtype.kind not in "fc":  # discrete actions are always finite
            return
        bad = _bad_rows(action)
        if bad.any():
            env = int(np.flatnonzero(bad)[0])
            kind = "a NaN" if np.isnan(np.asarray(action)[env]).any() else "an infinite"
            raise NonFiniteError(f"the policy gave env {env} {kind} action at vector step {step} "
                                 "(a diverged network? see the loss in metrics.jsonl)")

    def check(self, step: int, fields: dict[str, np.ndarray]) -> np.ndarray | None:
        """``fields`` maps names (``reward``, ``next_obs``, ...) to ``[num_envs, ...]`` arrays of
        vector step ``step``; returns the mask of envs to skip (``skip`` only), or None when
        there is nothing to skip. All finite, the usual case, costs one ``isfinite`` per field."""
        for values in fields.values():  # a plain loop: this runs at every env step
            # count_nonzero, not .all(): 0.6 us instead of 1.3 us per field (numpy 2.4, 8x4 floats)
            if values.dtype.kind in "fc" and np.count_nonzero(np.isfinite(values)) != values.size:
                break
        else:
            return None
        bad = {name: _bad_rows(values) for name, values in fields.items()}
        any_bad = np.logical_or.reduce(list(bad.values()))
        self.caught += int(np.count_nonzero(any_bad))
        name, rows = next((name, rows) for name, rows in bad.items() if rows.any())
        env = int(np.flatnonzero(rows)[0])
        values = np.asarray(fields[name])[env]
        kind = "a NaN" if np.isnan(values).any() else "an infinite"
        message = f"env {env} gave {kind} {name} at vector step {step}"
        if self.reaction == "raise":
            raise NonFiniteError(f"{message} (env.nonfinite=raise; 'warn' goes on, 'skip' ends such episodes)")
        if name not in self._warned:
            self._warned.add(name)
            logger.warning("%s (env.nonfinite=%s; logged once per field)", message, self.reaction)
        return any_bad if self.reaction == "skip" else None
