"""Learning curves as PNG, drawn from runs' ``metrics.jsonl``."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rlpipe.errors import MissingDependencyError, RlpipeError
from rlpipe.utils.metrics import read_metrics


class MetricNotFoundError(RlpipeError, ValueError):
    """A run's ``metrics.jsonl`` has no record with the metric asked for."""


def plot_runs(run_dirs: Sequence[Path], out: Path, title: str | None = None,
              ylabel: str | None = None, metric: str = "return_mean") -> Path:
    """Plot ``metric`` against env steps, one line per run; returns ``out``.

    ``metric`` is a key of the records in ``metrics.jsonl``: ``return_mean`` (the mean
    evaluation return, the default) or any training figure, e.g. ``train_success_rate`` or
    ``intrinsic_reward_mean``. A run without it is a one-line :class:`MetricNotFoundError`
    naming the keys it has.
    """
    curves = [_curve(Path(run_dir), metric) for run_dir in run_dirs]
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
    ax.set_ylabel(ylabel or ("mean evaluation return" if metric == "return_mean" else metric))
    ax.grid(alpha=0.3)
    ax.legend()
    if title:
        ax.set_title(title)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def _curve(run_dir: Path, metric: str) -> tuple[list[int], list[float]]:
    records = [r for r in read_metrics(run_dir) if metric in r]
    if not records:
        known = sorted({key for r in read_metrics(run_dir) for key in r} - {"kind", "env_step", "train_iter"})
        raise MetricNotFoundError(f"{run_dir}/metrics.jsonl has no metric '{metric}' (it has: {', '.join(known)})")
    return [r["env_step"] for r in records], [r[metric] for r in records]
