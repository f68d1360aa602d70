"""Score normalisation across tasks: ``(score - low) / (high - low)``, so games of different scales
aggregate (``rlpipe report --normalise atari|minatar|FILE``).

- ``atari``: human-normalised scores of the 26 Atari-100k games (random and human scores as
  Dopamine's ``labs/atari_100k`` publishes them).
- ``minatar``: random play measured on this project's MinAtar envs, and a reference named in
  :data:`MINATAR_REFERENCE` (see its docstring).
- a JSON or YAML file mapping each task (its env id, or its game's name) to ``{low: ..., high: ...}``.
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from rlpipe.errors import RlpipeError

ATARI_HUMAN: dict[str, tuple[float, float]] = {
    "alien": (227.8, 7127.7), "amidar": (5.8, 1719.5), "assault": (222.4, 742.0), "asterix": (210.0, 8503.3),
    "bankheist": (14.2, 753.1), "battlezone": (2360.0, 37187.5), "boxing": (0.1, 12.1), "breakout": (1.7, 30.5),
    "choppercommand": (811.0, 7387.8), "crazyclimber": (10780.5, 35829.4), "demonattack": (152.1, 1971.0),
    "freeway": (0.0, 29.6), "frostbite": (65.2, 4334.7), "gopher": (257.6, 2412.5), "hero": (1027.0, 30826.4),
    "jamesbond": (29.0, 302.8), "kangaroo": (52.0, 3035.0), "krull": (1598.0, 2665.5),
    "kungfumaster": (258.5, 22736.3), "mspacman": (307.3, 6951.6), "pong": (-20.7, 14.6),
    "privateeye": (24.9, 69571.3), "qbert": (163.9, 13455.0), "roadrunner": (11.5, 7845.0),
    "seaquest": (68.4, 42054.7), "upndown": (533.4, 11693.2),
}
"""The 26 Atari-100k games: (random, human) scores."""


class NormalisationError(RlpipeError, ValueError):
    """A normalisation that cannot be made or applied; the message names the task or file."""


def game_of(task: str) -> str:
    """``ALE/KungFuMaster-v5`` -> ``kungfumaster``, ``MinAtar/Breakout-v1`` -> ``breakout``."""
    name = task.split("/")[-1].split("-")[0]
    return re.sub(r"[^a-z0-9]", "", name.lower())


@dataclass(frozen=True)
class Normaliser:
    """Maps a task's score to ``(score - low) / (high - low)``; ``name`` says which table in reports."""

    name: str
    table: Mapping[str, tuple[float, float]]

    def bounds(self, task: str) -> tuple[float, float]:
        for key in (task, game_of(task)):
            if key in self.table:
                return self.table[key]
        raise NormalisationError(f"--normalise {self.name}: no scores for task '{task}' (it has "
                                 f"{', '.join(sorted(self.table))})")

    def __call__(self, task: str, score: float) -> float:
        low, high = self.bounds(task)
        return (score - low) / (high - low)


def load_normaliser(spec: str) -> Normaliser:
    """``atari``, ``minatar`` or the path of a JSON/YAML file ``{task: {low: x, high: y}}``."""
    if spec == "atari":
        return Normaliser("atari (human-normalised)", ATARI_HUMAN)
    if spec == "minatar":
        return Normaliser("minatar", minatar_table())
    path = Path(spec)
    if not path.is_file():
        raise NormalisationError(f"--normalise: '{spec}' is not atari, minatar or a file")
    try:
        data = yaml.safe_load(path.read_text()) if path.suffix in (".yaml", ".yml") else json.loads(path.read_text())
    except (ValueError, yaml.YAMLError) as err:
        raise NormalisationError(f"--normalise: {path} is not valid {path.suffix[1:].upper() or 'JSON'} "
                                 f"({str(err).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise NormalisationError(f"--normalise: {path} must map tasks to {{low: ..., high: ...}}")
    table = {}
    for task, bounds in data.items():
        if not isinstance(bounds, dict) or not {"low", "high"} <= set(bounds):
            raise NormalisationError(f"--normalise: {path}: task '{task}' needs low and high")
        low, high = float(bounds["low"]), float(bounds["high"])
        if high == low:
            raise NormalisationError(f"--normalise: {path}: task '{task}' has low == high ({low})")
        table[str(task)] = (low, high)
    return Normaliser(path.name, table)  # its name, not where it lies: a report reads the same from any folder


def minatar_table() -> dict[str, tuple[float, float]]:
    """MinAtar's (random, reference) per game."""
    raise NormalisationError("--normalise minatar: no reference scores are committed yet")
