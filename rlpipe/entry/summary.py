"""Run summary: the figures a user looks at first, written to ``summary.json``."""
from __future__ import annotations

import json
import math
import os
import time
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from rlpipe.config import Config, load_config
from rlpipe.errors import RlpipeError, first_line
from rlpipe.framework.context import OnlineRLContext
from rlpipe.framework.middleware.ckpt_handler import FINAL_CHECKPOINT


class SummaryError(RlpipeError, ValueError):
    """A ``summary.json`` that is not JSON, or whose keys or value types are not a run summary's."""


def _accepts(hint: Any, value: Any) -> bool:
    """Whether JSON ``value`` has the type ``hint`` names (an int is a float, a bool is not a number)."""
    options = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return any(
        (kind is type(None) and value is None) or (kind is bool and isinstance(value, bool))
        or (kind is str and isinstance(value, str)) or (kind is float and number)
        or (kind is int and number and isinstance(value, int))
        for kind in options
    )


ADDED_KEYS = ("code", "machine")
"""Keys newer than the first summaries: one that is absent takes its default (older runs resume)."""


@dataclass
class RunSummary:
    """What one training run achieved."""

    env_step: int = 0
    train_iter: int = 0
    best_eval_return: float | None = None
    last_eval_return: float | None = None
    solved: bool = False
    solved_env_step: int | None = None
    wall_time_s: float = 0.0
    updates_per_env_step: float | None = None
    """Gradient updates per collected env step (the replay ratio; None for episode collection)."""
    eval_metric: str = "return"
    """What ``best_eval_return`` and ``last_eval_return`` hold: the mean return or the success rate."""
    run_id: str | None = None
    """The run's identity, made at ``train`` and kept by ``resume``; every checkpoint's header
    carries it, so a checkpoint copied in from another run is refused."""
    stopped_by: str | None = None
    """What stopped the run early: a signal (``SIGINT``, ``SIGTERM``) or ``hook <name>`` (a hook of
    ``rlpipe.train`` that returned False); None when it ran to its end."""
    code: str | None = None
    """The code that ran it (:func:`~rlpipe.utils.provenance.code_version`), taken as it started and
    at each resume with other code (``"a, b"``): what its result records name, not the code at its end."""
    machine: str | None = None
    """The machine that ran it (:func:`~rlpipe.utils.provenance.machine_description`), taken as it
    started and at each resume on another machine (``"a; b"``): wall times and float kernels depend on it."""

    def add_provenance(self, code: str, machine: str) -> None:
        """Record that ``code`` runs this run from now on, on ``machine``."""
        self.code = _joined(self.code, code, ", ")
        self.machine = _joined(self.machine, machine, "; ")

    def write(self, path: Path) -> None:
        """Write as JSON, atomically (a temporary file, then a rename): a kill never leaves half a file."""
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2) + "\n")
        os.replace(tmp, path)

    def merge_evaluations(self, records: Iterable[Mapping[str, Any]], stop_value: float | None) -> None:
        """Take best, last and solved from the evaluation records of ``metrics.jsonl``.

        On resume they are the record of what happened: a run killed before it wrote its
        summary, or after its latest checkpoint, has evaluations its summary does not know.
        """
        key = "success_rate" if self.eval_metric == "success_rate" else "return_mean"
        for record in records:
            if record.get("kind") == "eval" and key in record:
                self.add_evaluation(float(record[key]), int(record["env_step"]), stop_value)

    def add_evaluation(self, value: float, env_step: int, stop_value: float | None) -> None:
        """Fold in one evaluation; a NaN or infinite figure (``env.nonfinite=warn``) is never best
        or solved, and nothing solves a task without a ``stop_value``."""
        self.last_eval_return = value
        if not math.isfinite(value):
            return
        self.best_eval_return = max(value, self.best_eval_return if self.best_eval_return is not None else value)
        if stop_value is not None and value >= stop_value and not self.solved:
            self.solved, self.solved_env_step = True, env_step

    @classmethod
    def read(cls, path: Path) -> RunSummary:
        """The summary an earlier (possibly interrupted) run wrote; a one-line :class:`SummaryError`
        naming what is wrong when it is not JSON, lacks a key, has one more, or a value of another type."""
        try:
            data = json.loads(path.read_bytes())
        except (ValueError, UnicodeDecodeError) as err:
            raise SummaryError(f"{path} is damaged: not JSON ({first_line(err)})") from None
        if not isinstance(data, dict):
            raise SummaryError(f"{path} is damaged: it holds a {type(data).__name__}, not an object")
        hints = typing.get_type_hints(cls)
        names = [field.name for field in fields(cls)]
        extra = sorted(set(data) - set(names))
        missing = [name for name in names if name not in data and name not in ADDED_KEYS]
        if extra or missing:
            what = f"unknown key '{extra[0]}'" if extra else f"key '{missing[0]}' missing"
            raise SummaryError(f"{path} is damaged: {what}")
        wrong = next((name for name in names if name in data and not _accepts(hints[name], data[name])), None)
        if wrong is not None:
            kind = getattr(hints[wrong], "__name__", str(hints[wrong]))
            raise SummaryError(f"{path} is damaged: key '{wrong}' is {data[wrong]!r}, not {kind}")
        return cls(**{name: data[name] for name in names if name in data})


def _joined(known: str | None, value: str, separator: str) -> str:
    """``known`` (values joined by ``separator``) with ``value`` added at the end unless already there."""
    values = known.split(separator) if known else []
    return separator.join(values if value in values else [*values, value])


SUMMARY_EVERY_S = 10.0


class summary_tracker:  # noqa: N801 - middleware are named like functions
    """Middleware keeping a :class:`RunSummary` up to date (reads counters and ``ctx.eval_value``).

    With ``path``, the summary is written there after every evaluation and at least every
    :data:`SUMMARY_EVERY_S` seconds, so a run that is killed keeps its best and solved figures
    and (nearly all of) its wall time.
    """

    def __init__(
        self, stop_value: float | None, earlier: RunSummary | None = None, updates_per_env_step: float | None = None,
        eval_metric: str = "return", path: Path | None = None,
    ) -> None:
        self.summary = earlier if earlier is not None else RunSummary()
        self.summary.updates_per_env_step = updates_per_env_step
        self.summary.eval_metric = eval_metric
        self.summary.stopped_by = None
        self._stop_value = stop_value
        self._path = path
        self._written = time.perf_counter()
        self._start = time.perf_counter() - self.summary.wall_time_s  # a resumed run keeps counting

    def elapsed(self) -> float:
        """Seconds since the run started (a resumed run's earlier time included)."""
        return time.perf_counter() - self._start

    def __call__(self, ctx: OnlineRLContext) -> None:
        s = self.summary
        s.env_step, s.train_iter = ctx.env_step, ctx.train_iter
        s.wall_time_s = round(self.elapsed(), 2)
        if ctx.eval_value is not None:
            s.add_evaluation(ctx.eval_value, ctx.env_step, self._stop_value)
        now = time.perf_counter()
        if self._path is not None and (ctx.eval_value is not None or now - self._written >= SUMMARY_EVERY_S):
            s.write(self._path)
            self._written = now


def reached_cap(counters: Mapping[str, int], cfg: Config) -> str | None:
    """The stop condition of ``cfg.run`` that a checkpoint's ``counters`` already meet, as
    ``key=cap (at N)``; None while the run has steps left."""
    caps = {"max_env_step": ("env_step", cfg.run.max_env_step),
            "max_train_iter": ("train_iter", cfg.run.max_train_iter)}
    for key, (counter, cap) in caps.items():
        if cap is not None and counters[counter] >= cap:
            return f"run.{key}={cap} (at {counter.replace('_', ' ')} {counters[counter]})"
    return None


def run_has_ended(run_dir: Path) -> bool:
    """Whether the run in ``run_dir`` came to its end: its summary says it solved (with
    ``run.stop_on_solve``) or spent its budget, no signal or hook stopped it, and its final
    checkpoint is there. A run killed outright also leaves a ``summary.json`` (written at each
    evaluation), so the file alone says nothing."""
    path = run_dir / "summary.json"
    if not path.is_file() or not (run_dir / "ckpt" / FINAL_CHECKPOINT).is_file():
        return False
    summary, cfg = RunSummary.read(path), load_config(run_dir / "config.yaml")
    counters = {"env_step": summary.env_step, "train_iter": summary.train_iter}
    done = reached_cap(counters, cfg) is not None or (summary.solved and cfg.run.stop_on_solve)
    return done and summary.stopped_by is None
