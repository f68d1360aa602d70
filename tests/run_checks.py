"""Checks on a run directory that several command-line tests make."""
from __future__ import annotations

import json
from pathlib import Path

from rlpipe.framework.middleware import buffer_file
from rlpipe.utils.checkpoint import read_header
from rlpipe.utils.metrics import read_metrics


def snapshot(run_dir: Path) -> dict[str, bytes]:
    """Every file of the run with its bytes, to show that nothing on disk changed."""
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file()}


def summary_agrees_with_metrics(run_dir: Path) -> dict:
    """Assert that summary.json's best and last evaluation are those of metrics.jsonl; return the summary."""
    summary = json.loads((run_dir / "summary.json").read_text())
    returns = [r["return_mean"] for r in read_metrics(run_dir) if r["kind"] == "eval"]
    assert summary["best_eval_return"] == max(returns) and summary["last_eval_return"] == returns[-1]
    return summary


def metrics_so_far(run_dir: Path) -> list[dict]:
    """The records of a run still writing; none while the file is missing or its last line half written."""
    try:
        return read_metrics(run_dir)
    except (FileNotFoundError, ValueError):
        return []


def saved_buffer(checkpoint: Path) -> Path:
    """The buffer file saved with ``checkpoint``: the one its header names."""
    return buffer_file(checkpoint, read_header(checkpoint))
