"""Checkpoint files: sealed, written atomically, loaded without executing code (``weights_only``).

A checkpoint file is three parts::

    RLPIPE-CHECKPOINT\\n
    {"format": 1, "run_id": ..., "env_step": ..., "train_iter": ..., "buffer_sha256": ..., "seal": {...}}\\n
    <torch.save payload>

The seal is a SHA-256 (HMAC-SHA256 with ``RLPIPE_CHECKPOINT_KEY``, see
:mod:`rlpipe.utils.integrity`) of the header without its seal and of the payload, so a
flipped byte or a truncation anywhere in the file is refused before torch reads it. The
header names the run the checkpoint belongs to and, for a checkpoint saved with the replay
buffer, that buffer file's SHA-256: resume refuses a checkpoint from another run and a
buffer from another moment. Files from before the seal (a bare torch zip) load unverified.
"""
from __future__ import annotations

import hmac
import io
import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from rlpipe.errors import RlpipeError, first_line
from rlpipe.utils.integrity import KEY_ENV, KEYED, PLAIN, algorithm_in_use, digest

MAGIC = b"RLPIPE-CHECKPOINT\n"
FORMAT_VERSION = 1
"""The newest checkpoint format this rlpipe writes and reads."""
_TORCH_ZIP = b"PK\x03\x04"  # a checkpoint written before the seal: torch.save's zip file


class CheckpointError(RlpipeError, ValueError):
    """A checkpoint file is missing, damaged, tampered with, from another run, or not a checkpoint."""


@dataclass(frozen=True)
class CheckpointHeader:
    """What a checkpoint's header says about it (all None for an unsealed, older file)."""

    format: int | None = None
    run_id: str | None = None
    env_step: int | None = None
    train_iter: int | None = None
    buffer_sha256: str | None = None
    """SHA-256 of the replay-buffer file saved with this checkpoint (None: saved without one)."""


def _canonical(header: dict[str, Any]) -> bytes:
    return json.dumps(header, sort_keys=True, separators=(",", ":")).encode()


def save_checkpoint(state: dict[str, Any], path: str | Path, run_id: str | None = None,
                    buffer_sha256: str | None = None) -> Path:
    """Seal ``state`` (see the module docstring) and write it to ``path`` via a temporary file
    and a rename, so a crash never leaves half a file. The env step and train iteration come
    from ``state["counters"]`` when it has them."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    counters = state.get("counters", {})
    header = asdict(CheckpointHeader(FORMAT_VERSION, run_id, counters.get("env_step"), counters.get("train_iter"),
                                     buffer_sha256))
    payload = io.BytesIO()
    torch.save(state, payload)
    body = payload.getvalue()
    algorithm = algorithm_in_use()
    header["seal"] = {"algorithm": algorithm, "digest": digest([_canonical(header), body], algorithm)}
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(MAGIC + _canonical(header) + b"\n")
            f.write(body)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _unseal(path: Path, data: bytes) -> tuple[CheckpointHeader, bytes]:
    """The verified header and payload of a sealed file's bytes; one-line errors otherwise."""
    line_end = data.find(b"\n", len(MAGIC))
    try:
        header = json.loads(data[len(MAGIC):line_end]) if line_end > 0 else None
    except (ValueError, UnicodeDecodeError):
        header = None
    if not isinstance(header, dict) or not isinstance(header.get("seal"), dict):
        raise CheckpointError(f"checkpoint {path} is damaged: its header cannot be read")
    seal = header.pop("seal")
    version = header.get("format")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise CheckpointError(f"checkpoint {path} has format {version!r}; this rlpipe reads formats up to "
                              f"{FORMAT_VERSION} (a newer rlpipe wrote it, or the file is damaged)")
    algorithm = seal.get("algorithm")
    if algorithm == PLAIN and algorithm_in_use() == KEYED:
        raise CheckpointError(f"checkpoint {path} is not signed but {KEY_ENV} is set: it may have been "
                              "written without the key")
    body = data[line_end + 1:]
    try:
        expected = digest([_canonical(header), body], str(algorithm))
    except ValueError as err:
        raise CheckpointError(f"checkpoint {path} cannot be verified: {err}") from None
    if not hmac.compare_digest(expected, str(seal.get("digest"))):
        raise CheckpointError(f"checkpoint {path} is damaged or was changed: its {algorithm} digest does not "
                              "match its contents")
    fields = {key: header.get(key) for key in CheckpointHeader.__dataclass_fields__}
    return CheckpointHeader(**fields), body


def read_checkpoint(path: str | Path, required: tuple[str, ...] = ("policy",)
                    ) -> tuple[dict[str, Any], CheckpointHeader]:
    """Verify and load a checkpoint (``weights_only=True``) and return it with its header;
    one-line :class:`CheckpointError` when it can't be."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    data = path.read_bytes()
    if data.startswith(MAGIC):
        header, body = _unseal(path, data)
    elif data.startswith(_TORCH_ZIP):
        header, body = CheckpointHeader(), data
    else:
        raise CheckpointError(f"checkpoint {path} is damaged or not an rlpipe checkpoint (unknown start of file)")
    try:
        state = torch.load(io.BytesIO(body), map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises many kinds for a corrupt file
        reason = first_line(err)
        raise CheckpointError(f"checkpoint {path} is corrupt or not a checkpoint ({reason[:160]})") from None
    if not isinstance(state, dict) or any(key not in state for key in required):
        raise CheckpointError(f"checkpoint {path} lacks the entries {list(required)}")
    return state, header


def load_checkpoint(path: str | Path, required: tuple[str, ...] = ("policy",)) -> dict[str, Any]:
    """The state of a verified checkpoint (see :func:`read_checkpoint`)."""
    return read_checkpoint(path, required)[0]
