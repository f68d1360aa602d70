"""Learning curves as PNG, drawn from runs' ``metrics.jsonl``."""
from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from rlpipe.errors import MissingDependencyError, RlpipeError
from rlpipe.utils.metrics import read_metrics


class MetricNotFoundError(RlpipeError, ValueError):
    """A run's ``metrics.jsonl`` has no record with the metric asked for."""


def plot_runs(run_dirs: Sequence[Path], out: Path, title: str | None = None,
              ylabel: str | None = None, metric: str | None = None) -> Path:
    """Plot ``metric`` against env steps, one line per run; returns ``out``.

    ``metric`` is a key of the records in ``metrics.jsonl``: ``return_mean`` (the mean
    evaluation return), ``success_rate`` (evaluation) or any training figure, e.g.
    ``train_success_rate`` or ``intrinsic_reward_mean``. None: each run's own evaluation
    figure (``success_rate`` where its ``summary.json`` says so, else ``return_mean``). A run
    without it is a one-line :class:`MetricNotFoundError` naming the keys it has.
    """
    metrics = [metric or _eval_metric_key(Path(run_dir)) for run_dir in run_dirs]
    curves = [_curve(Path(run_dir), key) for run_dir, key in zip(run_dirs, metrics, strict=True)]
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise MissingDependencyError("plotting needs matplotlib: pip install 'rlpipe[plot]'") from None
    fig, ax = plt.subplots(figsize=(7, 4))
    for run_dir, (steps, values) in zip(run_dirs, curves, strict=True):
        ax.plot(steps, values, label=Path(run_dir).name)
    ax.set_xlabel("env steps")
    names = {"return_mean": "mean evaluation return", "success_rate": "evaluation success rate"}
    ax.set_ylabel(ylabel or " / ".join(names.get(key, key) for key in dict.fromkeys(metrics)))
    ax.grid(alpha=0.3)
    ax.legend()
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
