"""Checkpoint files: written atomically, loaded without executing code (``weights_only``)."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import torch

from rlpipe.errors import RlpipeError


class CheckpointError(RlpipeError, ValueError):
    """A checkpoint file is missing, unreadable or not an rlpipe checkpoint."""


def save_checkpoint(state: dict[str, Any], path: str | Path) -> Path:
    """Write ``state`` to ``path`` via a temporary file and a rename, so a crash never leaves half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(state, f)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def load_checkpoint(path: str | Path, required: tuple[str, ...] = ("policy",)) -> dict[str, Any]:
    """Load a checkpoint with ``weights_only=True``; one-line :class:`CheckpointError` when it can't be."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises many kinds for a corrupt file
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise CheckpointError(f"checkpoint {path} is corrupt or not a checkpoint ({reason[:160]})") from None
    if not isinstance(state, dict) or any(key not in state for key in required):
        raise CheckpointError(f"checkpoint {path} lacks the entries {list(required)}")
    return state
