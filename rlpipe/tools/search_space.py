"""The search space of ``rlpipe tune``, written on the command line beside ordinary overrides.

- ``key=low:high``: a range; integers when both ends are integers, else floats. Log scale when
  both ends are positive and ``high / low >= 100`` (a learning rate ``1e-4:1e-2``), or when
  written ``key=log:low:high``.
- ``key=[a, b, c]``: one of the choices (YAML values, lists included: ``[[64, 64], [256, 256]]``).
- anything else (``run.max_env_step=20000``, ``env.env_id=my_envs:Corridor-v0``): a fixed
  override every trial takes.

Nothing here imports Optuna: a parameter suggests its value from any object with Optuna's
``suggest_int`` / ``suggest_float`` / ``suggest_categorical``.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from rlpipe.config import ConfigError
from rlpipe.config.loader import parse_override

LOG_SCALE_RATIO = 100
"""A range whose ends are both positive and this far apart or more is searched on a log scale."""


class Trial(Protocol):
    """What a parameter needs of an ``optuna.Trial``."""

    def suggest_int(self, name: str, low: int, high: int, *, log: bool = False) -> int: ...

    def suggest_float(self, name: str, low: float, high: float, *, log: bool = False) -> float: ...

    def suggest_categorical(self, name: str, choices: Sequence[Any]) -> Any: ...


@dataclass(frozen=True)
class Range:
    """``key`` between ``low`` and ``high`` (both included), on a log scale with ``log``."""

    key: str
    low: float
    high: float
    integer: bool
    log: bool

    def suggest(self, trial: Trial) -> Any:
        if self.integer:
            return trial.suggest_int(self.key, int(self.low), int(self.high), log=self.log)
        return trial.suggest_float(self.key, self.low, self.high, log=self.log)

    def value(self, suggested: Any) -> Any:
        """The config value of what Optuna stored for this parameter."""
        return suggested

    def examples(self) -> tuple[Any, ...]:
        """Values whose configs are checked before the search starts."""
        return (self.low, self.high)


@dataclass(frozen=True)
class Choice:
    """``key`` is one of ``choices``. Optuna stores only plain scalars, so a list choice is
    stored as its JSON text and turned back by :meth:`value`."""

    key: str
    choices: tuple[Any, ...]

    def _labels(self) -> list[Any]:
        return [c if c is None or isinstance(c, (bool, int, float, str)) else json.dumps(c) for c in self.choices]

    def suggest(self, trial: Trial) -> Any:
        return self.value(trial.suggest_categorical(self.key, self._labels()))

    def value(self, suggested: Any) -> Any:
        return dict(zip(self._labels(), self.choices, strict=True))[suggested]

    def examples(self) -> tuple[Any, ...]:
        return self.choices


Param = Range | Choice


def _number(text: str) -> float | None:
    """``text`` as an int or float (YAML's reading, so ``1e-4`` is a float), else None."""
    value = parse_override(f"x={text}")[1]
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def parse_param(text: str) -> Param | None:
    """The parameter ``text`` describes, or None when it is a fixed override; one-line
    :class:`ConfigError` for a range or a list of choices that cannot be searched."""
    key, _, raw = text.partition("=")
    key = key.strip()
    if raw.startswith("[") and raw.endswith("]"):
        choices = parse_override(text)[1]
        if not isinstance(choices, list) or not choices:
            raise ConfigError(f"tune: '{text}' needs at least one choice, e.g. {key}=[a, b]")
        if len({json.dumps(c) for c in choices}) != len(choices):
            raise ConfigError(f"tune: '{text}' lists a choice twice (a fixed list value is one choice: "
                              f"{key}=[{json.dumps(choices)}])")
        return Choice(key, tuple(choices))
    parts = raw.split(":")
    forced_log = len(parts) == 3 and parts[0].strip() == "log"
    if forced_log:
        parts = parts[1:]
    if len(parts) != 2:
        return None
    low, high = _number(parts[0]), _number(parts[1])
    if low is None or high is None:
        return None
    if not low < high:
        raise ConfigError(f"tune: range '{text}' needs low < high")
    if forced_log and low <= 0:
        raise ConfigError(f"tune: log range '{text}' needs low > 0")
    log = forced_log or (low > 0 and high / low >= LOG_SCALE_RATIO)
    return Range(key, low, high, isinstance(low, int) and isinstance(high, int), log)


def split_arguments(arguments: Iterable[str]) -> tuple[list[Param], list[str]]:
    """The search space and the fixed overrides among ``arguments`` (``key=...`` strings);
    one-line :class:`ConfigError` when a key is searched twice."""
    space: list[Param] = []
    fixed: list[str] = []
    for text in arguments:
        param = parse_param(text)
        if param is None:
            fixed.append(text)
        elif any(p.key == param.key for p in space):
            raise ConfigError(f"tune: '{param.key}' is searched twice")
        else:
            space.append(param)
    return space, fixed


def as_overrides(space: Sequence[Param], values: Mapping[str, Any]) -> list[str]:
    """``key=value`` overrides for the parameters' ``values`` (JSON text, which YAML reads back)."""
    return [f"{p.key}={json.dumps(values[p.key])}" for p in space]
