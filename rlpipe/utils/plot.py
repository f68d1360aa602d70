"""Learning curves as PNG, drawn from runs' ``metrics.jsonl``: one line per run, or with a
band one mean curve per group of runs (the seeds of one experiment)."""
from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from rlpipe.errors import MissingDependencyError, RlpipeError
from rlpipe.utils.metrics import read_metrics


class MetricNotFoundError(RlpipeError, ValueError):
    """A run's ``metrics.jsonl`` has no record with the metric asked for."""


BAND_LABELS = {"se": "standard error", "minmax": "min to max"}
"""Spreads a group's band can show: the standard error of the mean (``se``) or min to max (``minmax``)."""
SEED_SUFFIX = re.compile(r"-seed\d+(-\d+)?$")
"""The end of a run directory's name that differs between seeds (``default_run_dir`` adds
``-2``, ``-3`` when a name is taken)."""


@dataclass
class GroupCurve:
    """The runs of one group on a common grid of env steps: their mean and a band around it."""

    name: str
    runs: list[Path]
    env_step: np.ndarray
    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray


def group_name(run_dir: Path) -> str:
    """The group of a run: its directory name without a ``-seedN`` suffix, or, for a name without
    one, the ``exp_name`` of its ``config.yaml`` (else the name itself)."""
    name = Path(run_dir).name
    if SEED_SUFFIX.search(name):
        return SEED_SUFFIX.sub("", name)
    config = Path(run_dir) / "config.yaml"
    if config.is_file():
        exp_name = (yaml.safe_load(config.read_text()) or {}).get("exp_name")
        if isinstance(exp_name, str):
            return exp_name
    return name


def group_curves(run_dirs: Sequence[Path], metric: str | None = None, band: str = "se") -> list[GroupCurve]:
    """Per group of runs (:func:`group_name`, in the order groups first appear): ``metric`` of each
    run linearly interpolated onto the env steps at which any of them evaluated, between the
    latest first step and the earliest last step (where every run has data, so nothing is
    extrapolated); the mean over runs and a band: mean +- the standard error (``se``, the
    sample standard deviation over sqrt(runs); zero for a single run) or the runs' min to max."""
    if band not in BAND_LABELS:
        raise ValueError(f"band must be one of {', '.join(BAND_LABELS)}, got {band!r}")
    groups: dict[str, list[Path]] = {}
    for run_dir in run_dirs:
        groups.setdefault(group_name(Path(run_dir)), []).append(Path(run_dir))
    curves = []
    for name, runs in groups.items():
        grid, values = on_common_grid([_increasing(*_curve(run, metric or _eval_metric_key(run))) for run in runs])
        if not len(grid):
            raise MetricNotFoundError(f"the runs of group '{name}' share no range of env steps to average over")
        mean = values.mean(axis=0)
        if band == "minmax":
            low, high = values.min(axis=0), values.max(axis=0)
        else:
            se = values.std(axis=0, ddof=1) / np.sqrt(len(runs)) if len(runs) > 1 else np.zeros_like(mean)
            low, high = mean - se, mean + se
        curves.append(GroupCurve(name, runs, grid, mean, low, high))
    return curves


def on_common_grid(curves: Sequence[tuple[Sequence[float] | np.ndarray, Sequence[float] | np.ndarray]]
                   ) -> tuple[np.ndarray, np.ndarray]:
    """``(env steps, values)`` curves (steps increasing) interpolated linearly onto the env steps at
    which any of them has a point, between the latest first step and the earliest last step (where
    every curve has data, so nothing is extrapolated); ``(grid, values [curves, points])``."""
    start, stop = max(steps[0] for steps, _ in curves), min(steps[-1] for steps, _ in curves)
    grid = np.unique(np.concatenate([np.asarray(steps) for steps, _ in curves]))
    grid = grid[(grid >= start) & (grid <= stop)]
    return grid, np.stack([np.interp(grid, steps, values) for steps, values in curves])


def plot_runs(run_dirs: Sequence[Path], out: Path, title: str | None = None,
              ylabel: str | None = None, metric: str | None = None, band: str | None = None) -> Path:
    """Plot ``metric`` against env steps, one line per run; returns ``out``.

    With ``band`` (``se`` or ``minmax``), one mean line per group of runs with a shaded band
    instead (:func:`group_curves`), labelled with the group's name and its number of runs.

    ``metric`` is a key of the records in ``metrics.jsonl``: ``return_mean`` (the mean
    evaluation return), ``success_rate`` (evaluation) or any training figure, e.g.
    ``train_success_rate`` or ``intrinsic_reward_mean``. None: each run's own evaluation
    figure (``success_rate`` where its ``summary.json`` says so, else ``return_mean``). A run
    without it is a one-line :class:`MetricNotFoundError` naming the keys it has.
    """
    metrics = [metric or _eval_metric_key(Path(run_dir)) for run_dir in run_dirs]
    pairs = zip(run_dirs, metrics, strict=True)
    runs = [(Path(run_dir).name, *_curve(Path(run_dir), key)) for run_dir, key in pairs] if band is None else []
    groups = group_curves(run_dirs, metric, band) if band is not None else []
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise MissingDependencyError("plotting needs matplotlib: pip install 'rlpipe[plot]'") from None
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, steps, values in runs:
        ax.plot(steps, values, label=name)
    for group in groups:
        runs_label = f"{len(group.runs)} run{'s' if len(group.runs) != 1 else ''}"
        (line,) = ax.plot(group.env_step, group.mean, label=f"{group.name} ({runs_label})")
        ax.fill_between(group.env_step, group.low, group.high, color=line.get_color(), alpha=0.25, linewidth=0)
    ax.set_xlabel("env steps")
    names = {"return_mean": "mean evaluation return", "success_rate": "evaluation success rate"}
    ax.set_ylabel(ylabel or " / ".join(names.get(key, key) for key in dict.fromkeys(metrics)))
    ax.legend(title=None if band is None else f"mean and {BAND_LABELS[band]}")
    ax.grid(alpha=0.3)
    if title:
        ax.set_title(title)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def _eval_metric_key(run_dir: Path) -> str:
    """The metrics.jsonl key of the run's evaluation figure, as its summary.json names it."""
    summary = run_dir / "summary.json"
    eval_metric = json.loads(summary.read_text()).get("eval_metric") if summary.is_file() else None
    return "success_rate" if eval_metric == "success_rate" else "return_mean"


def _curve(run_dir: Path, metric: str) -> tuple[list[int], list[float]]:
    records = [r for r in read_metrics(run_dir) if metric in r]
    if not records:
        known = sorted({key for r in read_metrics(run_dir) for key in r} - {"kind", "env_step", "train_iter"})
        raise MetricNotFoundError(f"{run_dir}/metrics.jsonl has no metric '{metric}' (it has: {', '.join(known)})")
    return [r["env_step"] for r in records], [r[metric] for r in records]


def _increasing(steps: list[int], values: list[float]) -> tuple[np.ndarray, np.ndarray]:
    """A curve with strictly increasing env steps (what interpolation needs): a resumed run may
    log an env step again after going back to its checkpoint; the later record is kept."""
    latest = dict(zip(steps, values, strict=True))
    order = sorted(latest)
    return np.asarray(order), np.asarray([latest[step] for step in order])
