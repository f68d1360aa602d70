"""Checkpoint files: sealed, written atomically, loaded without executing code (``weights_only``).

A checkpoint file is three parts::

    RLPIPE-CHECKPOINT\\n
    {"format": 2, "run_id": ..., "env_step": ..., "train_iter": ..., "buffer_sha256": ...,
     "buffer_file": ..., "seal": {...}}\\n
    <torch.save payload>

The seal is a SHA-256 (HMAC-SHA256 with ``RLPIPE_CHECKPOINT_KEY``, see
:mod:`rlpipe.utils.integrity`) of the header without its seal and of the payload, so a
flipped byte or a truncation anywhere in the file is refused before torch reads it. The
header names the run the checkpoint belongs to and, for a checkpoint saved with the replay
buffer, that buffer file (its name in format 2; ``NAME.buffer.npz`` beside ``NAME.pth.tar``
in format 1) and its SHA-256: resume refuses a checkpoint from another run and a buffer from
another moment.

A seal cannot be stripped: a file without one (a bare torch zip, as rlpipe wrote before the
seal, or as anyone can write) is refused unless the caller allows it explicitly
(``allow_unsealed``, ``--allow-unsealed``), and then loads with one warning line saying what
is not checked. A run directory records in :data:`RUN_RECORD` the strongest seal its
checkpoints were written with, so a run whose checkpoints are signed (HMAC) refuses a file
sealed with the plain SHA-256 that anyone can compute.
"""
from __future__ import annotations

import hmac
import io
import json
import logging
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from rlpipe.errors import RlpipeError, first_line
from rlpipe.utils.integrity import KEY_ENV, KEYED, PLAIN, algorithm_in_use, digest

MAGIC = b"RLPIPE-CHECKPOINT\n"
FORMAT_VERSION = 2
"""The newest checkpoint format this rlpipe writes and reads (2 names its buffer file in the header)."""
_TORCH_ZIP = b"PK\x03\x04"  # a checkpoint written before the seal: torch.save's zip file
RUN_RECORD = "run.json"
"""The file of a run directory that records how its checkpoints are sealed (``{"checkpoint_seal": ...}``)."""
ALLOW_UNSEALED = "--allow-unsealed (allow_unsealed=True)"
_STRENGTH = {PLAIN: 0, KEYED: 1}

logger = logging.getLogger(__name__)


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
    buffer_file: str | None = None
    """Name of that buffer file, in the checkpoint's directory (None in format 1: ``NAME.buffer.npz``)."""

    @property
    def sealed(self) -> bool:
        """Whether the file had a seal (and passed it); False for a bare torch zip."""
        return self.format is not None


def _canonical(header: dict[str, Any]) -> bytes:
    return json.dumps(header, sort_keys=True, separators=(",", ":")).encode()


def save_checkpoint(state: dict[str, Any], path: str | Path, run_id: str | None = None,
                    buffer_sha256: str | None = None, buffer_file: str | None = None) -> Path:
    """Seal ``state`` (see the module docstring) and write it to ``path`` via a temporary file
    and a rename, so a crash never leaves half a file. The env step and train iteration come
    from ``state["counters"]`` when it has them; ``buffer_file`` names the buffer saved with it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    counters = state.get("counters", {})
    header = asdict(CheckpointHeader(FORMAT_VERSION, run_id, counters.get("env_step"), counters.get("train_iter"),
                                     buffer_sha256, buffer_file))
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


def _unseal(path: Path, data: bytes, run_seal: str | None) -> tuple[CheckpointHeader, bytes]:
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
    if algorithm == PLAIN and run_seal == KEYED:
        raise CheckpointError(f"checkpoint {path} is sealed with {PLAIN}, but its run's {RUN_RECORD} says the run "
                              f"writes {KEYED} checkpoints: it was not written with the run's key")
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


def _refuse_unsealed(path: Path, allow_unsealed: bool, warn: bool) -> None:
    """One line refusing a file without a seal, or (allowed, ``warn``) one warning line saying what is not checked."""
    if not allow_unsealed:
        keyed = f" ({KEY_ENV} is set: only files signed with it are trusted)" if algorithm_in_use() == KEYED else ""
        raise CheckpointError(f"checkpoint {path} is not sealed (a bare torch.save file), so nothing shows it was "
                              f"not changed{keyed}; a genuine checkpoint from before the seal loads with "
                              f"{ALLOW_UNSEALED}")
    if warn:
            logger.warning("checkpoint %s is not sealed: loaded unverified as %s asks: its contents, the run it "
                       "belongs to and the buffer file loaded with it are not checked", path, ALLOW_UNSEALED)


def _verified(path: Path, allow_unsealed: bool, run_seal: str | None, warn: bool) -> tuple[CheckpointHeader, bytes]:
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    data = path.read_bytes()
    if data.startswith(MAGIC):
        return _unseal(path, data, run_seal)
    if data.startswith(_TORCH_ZIP):
        _refuse_unsealed(path, allow_unsealed, warn)
        return CheckpointHeader(), data
    raise CheckpointError(f"checkpoint {path} is damaged or not an rlpipe checkpoint (unknown start of file)")


def read_header(path: str | Path, *, allow_unsealed: bool = False, run_seal: str | None = None) -> CheckpointHeader:
    """The verified header of a checkpoint, without loading its payload (see :func:`read_checkpoint`;
    the warning for an allowed unsealed file comes when it is loaded)."""
    return _verified(Path(path), allow_unsealed, run_seal, warn=False)[0]


def read_checkpoint(path: str | Path, required: tuple[str, ...] = ("policy",), *, allow_unsealed: bool = False,
                    run_seal: str | None = None) -> tuple[dict[str, Any], CheckpointHeader]:
    """Verify and load a checkpoint (``weights_only=True``) and return it with its header;
    one-line :class:`CheckpointError` when it can't be. A file without a seal is refused unless
    ``allow_unsealed``; ``run_seal``: the seal its run records (:func:`recorded_seal`), below
    which a file is refused."""
    path = Path(path)
    header, body = _verified(path, allow_unsealed, run_seal, warn=True)
    try:
        state = torch.load(io.BytesIO(body), map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises many kinds for a corrupt file
        reason = first_line(err)
        raise CheckpointError(f"checkpoint {path} is corrupt or not a checkpoint ({reason[:160]})") from None
    if not isinstance(state, dict) or any(key not in state for key in required):
        raise CheckpointError(f"checkpoint {path} lacks the entries {list(required)}")
    return state, header


def load_checkpoint(path: str | Path, required: tuple[str, ...] = ("policy",), *, allow_unsealed: bool = False,
                    run_seal: str | None = None) -> dict[str, Any]:
    """The state of a verified checkpoint (see :func:`read_checkpoint`)."""
    return read_checkpoint(path, required, allow_unsealed=allow_unsealed, run_seal=run_seal)[0]


def recorded_seal(run_dir: str | Path) -> str | None:
    """The seal ``run_dir``'s checkpoints are written with (:data:`RUN_RECORD`); None for a run
    from before the record (or a directory that is not a run)."""
    path = Path(run_dir) / RUN_RECORD
    if not path.is_file():
        return None
    try:
        seal = json.loads(path.read_text()).get("checkpoint_seal")
    except (ValueError, UnicodeDecodeError, AttributeError):
        seal = None
    if seal not in _STRENGTH:
        raise CheckpointError(f"run file {path} is damaged: it does not say how the run's checkpoints are sealed")
    return str(seal)


def required_seal(checkpoint: str | Path, *run_dirs: str | Path) -> str | None:
    """The strongest seal recorded by ``run_dirs`` and by the run directory ``checkpoint`` sits in
    (``RUN/ckpt/NAME.pth.tar``): the least a file must carry to be loaded for them."""
    path = Path(checkpoint).resolve()
    dirs = [*run_dirs, *([path.parent.parent] if path.parent.name == "ckpt" else [])]
    seals = [seal for seal in map(recorded_seal, dirs) if seal is not None]
    return max(seals, key=_STRENGTH.__getitem__, default=None)


def record_seal(run_dir: str | Path) -> str:
    """Record in ``run_dir`` that its checkpoints are sealed with the algorithm in use, or with a
    stronger one recorded before; returns what is recorded. Written atomically."""
    path = Path(run_dir) / RUN_RECORD
    earlier, now = recorded_seal(run_dir), algorithm_in_use()
    seal = now if earlier is None or _STRENGTH[now] >= _STRENGTH[earlier] else earlier
    if seal != earlier:
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps({"checkpoint_seal": seal}) + "\n")
        os.replace(tmp, path)
    return seal
