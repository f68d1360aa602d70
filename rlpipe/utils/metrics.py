"""Metrics sink: a JSONL file always, TensorBoard too when it is installed."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class MetricsWriter:
    """Append one JSON object per record to ``metrics.jsonl`` (and scalars to TensorBoard)."""

    def __init__(self, run_dir: str | Path, tensorboard: bool = True) -> None:
        self.path = Path(run_dir) / "metrics.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("a", buffering=1)
        self._tb = _tensorboard_writer(Path(run_dir) / "tb") if tensorboard else None

    def write(self, kind: str, step: int, values: dict[str, Any]) -> None:
        """Record ``values`` of one ``kind`` (``train``, ``eval``) at env step ``step``."""
        self._file.write(json.dumps({"kind": kind, "env_step": step, **values}) + "\n")
        if self._tb is not None:
            for key, value in values.items():
                if isinstance(value, (int, float)):
                    self._tb.add_scalar(f"{kind}/{key}", value, step)

    def close(self) -> None:
        self._file.close()
        if self._tb is not None:
            self._tb.close()


def _tensorboard_writer(log_dir: Path) -> Any:
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:  # tensorboard is an optional extra
        return None
    return SummaryWriter(log_dir=str(log_dir))


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """All records of a ``metrics.jsonl`` file (or of ``RUN_DIR/metrics.jsonl``)."""
    path = Path(path)
    if path.is_dir():
        path = path / "metrics.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"no metrics file at {path}")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
