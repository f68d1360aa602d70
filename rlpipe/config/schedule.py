"""Schedules of a value over the run's env steps: learning rates and epsilon, written the same way.

A schedule is written as a number (a constant), a string or a mapping::

    3e-4                                              a constant
    linear(3e-4, 1e-5)                                start -> end over the run's env-step budget
    linear(1.0, 0.05, 10000)                          start -> end over 10,000 env steps, then end
    exp(1.0, 0.05, 10000)                             end + (start - end) * exp(-env_step / 10000)
    constant(0.1)                                     the same as 0.1
    {type: linear, start: 3e-4, end: 1e-5, decay: 50000}

**The horizon counts env steps** (``ctx.env_step``, transitions collected, random warm-up
included), for every schedule, as Stable-Baselines3 counts its ``progress_remaining`` over
``total_timesteps`` and as epsilon always decayed. ``decay`` is the length of a linear decay
or the time constant of an exponential one; without it the schedule spans the run's budget,
``run.max_env_step``, as that key is set in the run (a resumed run whose cap was raised
stretches such a schedule to the new cap; give ``decay`` to pin it).
"""
from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast, get_args

ScheduleType = Literal["constant", "linear", "exp"]
SCHEDULE_TYPES: tuple[str, ...] = get_args(ScheduleType)
SCHEDULE_FORMS = "a number, 'linear(start, end)', 'linear(start, end, decay_env_steps)', 'exp(start, end, decay)'"
"""What a schedule may be written as, for one-line errors."""
_CALL = re.compile(r"^\s*([A-Za-z_]\w*)\s*\((.*)\)\s*$")


class ScheduleError(ValueError):
    """A schedule that cannot be read or evaluated; the message is one line (without the key)."""


@dataclass(frozen=True)
class Schedule:
    """A value over env steps: ``constant`` (``start``), ``linear`` from ``start`` to ``end`` over
    ``decay`` env steps, or ``exp`` from ``start`` toward ``end`` with time constant ``decay``;
    ``decay`` None spans the run's env-step budget."""

    type: ScheduleType
    start: float
    end: float
    decay: int | None = None

    def value(self, env_step: int, budget: int | None = None) -> float:
        """The value at ``env_step``; ``budget`` (``run.max_env_step``) is the horizon when ``decay`` is None."""
        if self.type == "constant":
            return self.start
        horizon = self.decay if self.decay is not None else budget
        if horizon is None:
            raise ScheduleError(f"'{self}' needs a decay length (no run.max_env_step to span)")
        if self.type == "linear":
            return self.end + (self.start - self.end) * max(0.0, 1.0 - env_step / horizon)
        return self.end + (self.start - self.end) * math.exp(-env_step / horizon)

    def __str__(self) -> str:
        """The string form, which :func:`parse_schedule` reads back to an equal schedule."""
        if self.type == "constant":
            return f"constant({self.start!r})"
        decay = "" if self.decay is None else f", {self.decay}"
        return f"{self.type}({self.start!r}, {self.end!r}{decay})"


def _number(value: Any) -> float:
    """A finite number from a number or its text."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, str)):
        raise ScheduleError(f"expected a number, got {value!r}")
    try:
        number = float(value)
    except ValueError:
        raise ScheduleError(f"{str(value).strip()!r} is not a number") from None
    if not math.isfinite(number):
        raise ScheduleError(f"{value!r} is not a finite number")
    return number


def _decay(value: Any) -> int:
    """A positive whole number of env steps (``1e5`` reads as 100000)."""
    number = float(value) if isinstance(value, numbers.Real) and not isinstance(value, bool) else math.nan
    if not (math.isfinite(number) and number.is_integer() and number >= 1):
        raise ScheduleError(f"decay must be a positive whole number of env steps, got {value!r}")
    return int(number)


def parse_schedule(text: str) -> Schedule:
    """A schedule from its string form: ``linear(start, end[, decay])``, ``exp(start, end[, decay])``,
    ``constant(x)`` or a bare number; :class:`ScheduleError` in one line otherwise."""
    match = _CALL.match(text)
    if match is None:
        try:
            value = _number(text)
        except ScheduleError:
            raise ScheduleError(f"cannot read schedule {text!r}: write {SCHEDULE_FORMS}") from None
        return Schedule("constant", value, value)
    kind, inner = match.group(1), match.group(2)
    args = inner.split(",") if inner.strip() else []
    if kind not in SCHEDULE_TYPES:
        raise ScheduleError(f"unknown schedule {kind!r} in {text!r} (use {', '.join(SCHEDULE_TYPES)})")
    try:
        if kind == "constant":
            if len(args) != 1:
                raise ScheduleError("constant takes one value")
            value = _number(args[0])
            return Schedule("constant", value, value)
        if len(args) not in (2, 3):
            raise ScheduleError(f"{kind} takes start, end and an optional decay in env steps")
        decay = _decay(_number(args[2])) if len(args) == 3 else None
        return Schedule(cast(ScheduleType, kind), _number(args[0]), _number(args[1]), decay)
    except ScheduleError as err:
        raise ScheduleError(f"cannot read schedule {text!r}: {err}") from None


def schedule_from_mapping(data: Mapping[str, Any]) -> Schedule:
    """A schedule from ``{type, start, end, decay}`` (``end`` absent: ``start``; ``decay`` absent: the budget)."""
    unknown = sorted(set(data) - {"type", "start", "end", "decay"})
    if unknown:
        raise ScheduleError(f"unknown schedule key {unknown[0]!r} (use type, start, end, decay)")
    kind = data.get("type", "linear")
    if kind not in SCHEDULE_TYPES:
        raise ScheduleError(f"unknown schedule type {kind!r} (use {', '.join(SCHEDULE_TYPES)})")
    if "start" not in data:
        raise ScheduleError("a schedule mapping needs 'start'")
    start = _number(data["start"])
    end = _number(data.get("end", start))
    decay = None if data.get("decay") is None else _decay(data["decay"])
    return Schedule(kind, start, start if kind == "constant" else end, decay)


def as_schedule(value: Any) -> Schedule:
    """``value`` as a :class:`Schedule`: a number (a constant), a string form, a mapping, or a schedule."""
    if isinstance(value, Schedule):
        return value
    if isinstance(value, bool):
        raise ScheduleError(f"expected {SCHEDULE_FORMS}, got {value!r}")
    if isinstance(value, numbers.Real):  # numpy's numbers too (a seed-style config's)
        number = _number(value)
        return Schedule("constant", number, number)
    if isinstance(value, str):
        return parse_schedule(value)
    if isinstance(value, Mapping):
        return schedule_from_mapping(value)
    raise ScheduleError(f"expected {SCHEDULE_FORMS}, got {value!r}")
