"""Learning curves as PNG, drawn from runs' ``metrics.jsonl``."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rlpipe.errors import MissingDependencyError
from rlpipe.utils.metrics import read_metrics


def plot_runs(run_dirs: Sequence[Path], out: Path, title: str | None = None,
              ylabel: str = "mean evaluation return") -> Path:
    """Plot mean evaluation return against env steps, one line per run; returns ``out``."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise MissingDependencyError("plotting needs matplotlib: pip install 'rlpipe[plot]'") from None
    fig, ax = plt.subplots(figsize=(7, 4))
    for run_dir in run_dirs:
        evals = [r for r in read_metrics(run_dir) if r["kind"] == "eval"]
        ax.plot([r["env_step"] for r in evals], [r["return_mean"] for r in evals], label=Path(run_dir).name)
    ax.set_xlabel("env steps")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend()
    if title:
        ax.set_title(title)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
