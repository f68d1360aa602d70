"""A dataset on disk: one ``.npy`` file per column and a sealed ``manifest.json``.

Layout of a dataset directory::

    manifest.json     format, size, spaces, the env, episode statistics, reference returns,
                      provenance, each column's file, dtype, shape and SHA-256, and a seal
    obs.npy action.npy reward.npy next_obs.npy terminated.npy truncated.npy env_id.npy
    frames.npy        (stacked-frame observations only, format 2: each frame once; ``obs.npy`` and
                      ``next_obs.npy`` then hold each row's frame indices, :mod:`rlpipe.data.dataset.frames`)

The rows are one-step transitions (``reward`` is one step's; ``next_obs`` follows ``obs``);
``env_id`` says which env each row came from, so episodes can be found in interleaved rows
(:mod:`rlpipe.data.dataset.episodes`). The files are plain numpy arrays (no pickle), opened as
memory maps: a dataset of millions of transitions is not read into memory twice, and pages
the learner never samples are never read. The seal is a SHA-256 (HMAC-SHA256 with
``RLPIPE_CHECKPOINT_KEY``, as checkpoints) of the manifest without it; the manifest holds each
file's SHA-256, so a changed byte anywhere is refused when the dataset is opened. A dataset is
written into a hidden directory that is renamed into place only when complete.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces

from rlpipe.data.dataset.episodes import Episodes, find_episodes
from rlpipe.data.dataset.errors import DatasetError
from rlpipe.data.dataset.frames import STACK_FIELDS, FrameStacks, holds_frame_stacks
from rlpipe.data.dataset.spaces import space_from_json, space_to_json
from rlpipe.errors import first_line
from rlpipe.utils.integrity import KEYED, PLAIN, algorithm_in_use, digest, file_sha256

__all__ = ["COLUMNS", "FORMAT", "FRAMES_FORMAT", "MANIFEST", "Dataset", "DatasetError", "dataset_in_memory",
           "write_dataset"]

FORMAT = "rlpipe.dataset/1"
FRAMES_FORMAT = "rlpipe.dataset/2"
"""Format 1 with the observations as frame stacks (``frames.npy`` and each row's indices into it)."""
MANIFEST = "manifest.json"
FRAMES_FILE = "frames.npy"
COLUMNS = ("obs", "action", "reward", "next_obs", "terminated", "truncated", "env_id")
"""The columns every dataset holds, one row per transition."""


def _canonical(manifest: Mapping[str, Any]) -> bytes:
    return json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()


def _expected_shapes(observation_space: spaces.Space[Any], action_space: spaces.Space[Any]) -> dict[str, tuple]:
    """Each column's row shape for these spaces (a Discrete action or observation is one integer)."""
    def row(space: spaces.Space[Any]) -> tuple[int, ...]:
        return () if isinstance(space, spaces.Discrete) else tuple(space.shape or ())
    obs = row(observation_space)
    return {"obs": obs, "next_obs": obs, "action": row(action_space), "reward": (), "terminated": (),
            "truncated": (), "env_id": ()}


def _column_dtype(name: str, observation_space: spaces.Space[Any], action_space: spaces.Space[Any]) -> np.dtype:
    """The dtype a column is stored in: the space's for observations and continuous actions, int64
    for discrete ones, float32 rewards, bool flags, int64 env ids."""
    if name in ("obs", "next_obs"):
        discrete = isinstance(observation_space, spaces.Discrete)
        return np.dtype(np.int64) if discrete else np.dtype(observation_space.dtype)
    if name == "action":
        return np.dtype(np.int64) if isinstance(action_space, spaces.Discrete) else np.dtype(action_space.dtype)
    return np.dtype({"reward": np.float32, "env_id": np.int64}.get(name, bool))


def check_columns(columns: Mapping[str, Any], observation_space: spaces.Space[Any],
                  action_space: spaces.Space[Any]) -> int:
    """The number of rows; one line naming the column that is missing, empty or of the wrong shape."""
    missing = [name for name in COLUMNS if name not in columns]
    if missing:
        raise DatasetError(f"a dataset needs column '{missing[0]}' (it holds {', '.join(COLUMNS)})")
    unknown = sorted(set(columns) - set(COLUMNS))
    if unknown:
        raise DatasetError(f"a dataset holds {', '.join(COLUMNS)}; column '{unknown[0]}' is not one of them")
    size = len(columns["reward"])
    if size == 0:
        raise DatasetError("the dataset is empty: it holds no transitions")
    for name, shape in _expected_shapes(observation_space, action_space).items():
        got = np.shape(columns[name])
        if got != (size, *shape):
            raise DatasetError(f"dataset column '{name}' has shape {got}, expected {(size, *shape)} "
                               f"({size} rows of {shape or 'one value'})")
    return size


@dataclass(frozen=True)
class Dataset:
    """An opened dataset: its columns (read-only memory maps; ``obs`` and ``next_obs`` are
    :class:`~rlpipe.data.dataset.frames.FrameStacks` in format 2), spaces and manifest."""

    path: Path
    manifest: dict[str, Any]
    columns: dict[str, Any] = field(repr=False)

    @property
    def size(self) -> int:
        return int(self.manifest["size"])

    @property
    def seal(self) -> str:
        """The manifest's seal: the dataset's identity (any change to any file changes it or fails it)."""
        return str(self.manifest["seal"]["digest"])

    @property
    def observation_space(self) -> spaces.Space[Any]:
        return space_from_json(self.manifest["observation_space"])

    @property
    def action_space(self) -> spaces.Space[Any]:
        return space_from_json(self.manifest["action_space"])

    @property
    def env_id(self) -> str:
        return str(self.manifest["env_id"])

    def episodes(self) -> Episodes:
        """The whole episodes in the rows (see :func:`~rlpipe.data.dataset.episodes.find_episodes`)."""
        c = self.columns
        return find_episodes(c["env_id"], c["terminated"] | c["truncated"], c["reward"],
                             bool(self.manifest.get("first_partial", False)))

    @classmethod
    def open(cls, path: str | Path) -> Dataset:
        """Open the dataset at ``path``, checking its seal and every file's SHA-256 (one line naming the
        file that fails)."""
        path = Path(path)
        manifest_path = path / MANIFEST
        if not path.is_dir():
            raise DatasetError(f"dataset {path} does not exist (or is not a directory)")
        if not manifest_path.is_file():
            raise DatasetError(f"{path} is not an rlpipe dataset: it has no {MANIFEST}")
        try:
            manifest = json.loads(manifest_path.read_text())
        except (OSError, ValueError, UnicodeDecodeError) as err:
            raise DatasetError(f"{manifest_path} is damaged ({first_line(err)})") from None
        if not isinstance(manifest, dict) or manifest.get("format") not in (FORMAT, FRAMES_FORMAT):
            got = manifest.get("format") if isinstance(manifest, dict) else None
            raise DatasetError(f"{manifest_path} has format {got!r}, expected {FORMAT!r} or {FRAMES_FORMAT!r}")
        _check_seal(manifest, manifest_path)
        columns: dict[str, Any] = {}
        for name in COLUMNS:
            entry = manifest["columns"].get(name)
            if entry is None:
                raise DatasetError(f"{manifest_path} lists no column '{name}'")
            columns[name] = _load_file(path, entry, manifest_path)
        if manifest["format"] == FRAMES_FORMAT:
            frames = _load_file(path, manifest["frames"], manifest_path)
            for name in STACK_FIELDS:
                index = columns[name]
                if index.ndim != 2 or not _indexes(index, len(frames)):
                    raise DatasetError(f"dataset file {path / manifest['columns'][name]['file']} does not index "
                                       f"the {len(frames)} frames of {path / manifest['frames']['file']}")
                columns[name] = FrameStacks(frames, index)
        return cls(path, manifest, columns)

    @property
    def stored_frames(self) -> int | None:
        """How many distinct frames the observations are made of (None: stored as arrays)."""
        obs = self.columns["obs"]
        return len(obs.frames) if isinstance(obs, FrameStacks) else None


def _load_file(path: Path, entry: Mapping[str, Any], manifest_path: Path) -> np.ndarray:
    """The array of one manifest ``entry`` (file, dtype, shape, SHA-256) as a read-only memory map; one line
    naming the file when it is missing, changed or not what the manifest says."""
    file = path / entry["file"]
    if not file.is_file():
        raise DatasetError(f"dataset file {file} is missing")
    if file_sha256(file) != entry["sha256"]:
        raise DatasetError(f"dataset file {file} does not match its SHA-256 in {manifest_path} (damaged or "
                           "changed after the dataset was written)")
    values = np.load(file, mmap_mode="r", allow_pickle=False)
    if str(values.dtype) != entry["dtype"] or list(values.shape) != entry["shape"]:
        raise DatasetError(f"dataset file {file} holds {values.dtype} {list(values.shape)}, its manifest says "
                           f"{entry['dtype']} {entry['shape']}")
    return values


def _check_seal(manifest: Mapping[str, Any], where: Path) -> None:
    seal = manifest.get("seal")
    if not isinstance(seal, dict) or seal.get("algorithm") not in (PLAIN, KEYED):
        raise DatasetError(f"{where} has no seal: not written by rlpipe, or edited")
    unsealed = {key: value for key, value in manifest.items() if key != "seal"}
    try:
        expected = digest([_canonical(unsealed)], seal["algorithm"])
    except ValueError as err:  # signed, and no key here
        raise DatasetError(f"{where}: {err}") from None
    if expected != seal.get("digest"):
        raise DatasetError(f"{where} does not match its seal: the manifest was changed after it was written")


def _prepared(columns: Mapping[str, Any], observation_space: spaces.Space[Any],
              action_space: spaces.Space[Any], env_id: str) -> dict[str, Any]:
    """The columns checked (:func:`check_columns`) and in their stored dtypes, contiguous (frame
    stacks stay frame stacks)."""
    try:
        space_to_json(observation_space), space_to_json(action_space)
    except ValueError as err:
        raise DatasetError(f"cannot make a dataset of env '{env_id}': {err}") from None
    check_columns(columns, observation_space, action_space)
    stacked = holds_frame_stacks(columns)
    stored: dict[str, Any] = {
        name: np.ascontiguousarray(columns[name], dtype=_column_dtype(name, observation_space, action_space))
        for name in COLUMNS if not (stacked and name in STACK_FIELDS)}
    if stacked:
        _check_frame_stacks(columns, observation_space)
        frames = np.ascontiguousarray(columns["obs"].frames)  # one array, shared by both fields as written
        for name in STACK_FIELDS:
            stored[name] = FrameStacks(frames, np.ascontiguousarray(columns[name].index, dtype=np.int32))
    return stored


def _check_frame_stacks(columns: Mapping[str, Any], observation_space: spaces.Space[Any]) -> None:
    """One line unless ``obs`` and ``next_obs`` are both :class:`FrameStacks` over one frames array of
    the observation space's dtype."""
    obs, next_obs = (columns[name] for name in STACK_FIELDS)
    if not (isinstance(obs, FrameStacks) and isinstance(next_obs, FrameStacks) and obs.frames is next_obs.frames):
        raise DatasetError("frame stacks: obs and next_obs must both be FrameStacks over one frames array")
    if obs.dtype != observation_space.dtype:
        raise DatasetError(f"dataset frames are {obs.dtype}, the observation space holds {observation_space.dtype}")
    for name, stacks in zip(STACK_FIELDS, (obs, next_obs), strict=True):
        if not _indexes(stacks.index, len(stacks.frames)):
            raise DatasetError(f"frame stacks '{name}' index frames outside the {len(stacks.frames)} given")


def _indexes(index: np.ndarray, frames: int) -> bool:
    """Whether every entry of ``index`` names one of ``frames`` frames."""
    return index.size == 0 or (int(index.min()) >= 0 and int(index.max()) < frames)


def _sealed_manifest(
    stored: Mapping[str, Any], entries: Mapping[str, Any], observation_space: spaces.Space[Any],
    action_space: spaces.Space[Any], env_id: str, provenance: Mapping[str, Any],
    reference_returns: Mapping[str, float] | None, first_partial: bool,
) -> dict[str, Any]:
    """The manifest of ``stored`` columns described by ``entries`` (file, dtype, shape, SHA-256; with
    frame stacks also ``frames``, the frames file's), sealed."""
    episodes = find_episodes(stored["env_id"], stored["terminated"] | stored["truncated"], stored["reward"],
                             first_partial)
    frames = entries.get(FRAMES_FILE)
    manifest: dict[str, Any] = {
        "format": FORMAT if frames is None else FRAMES_FORMAT, "size": len(stored["reward"]), "env_id": env_id,
        "observation_space": space_to_json(observation_space), "action_space": space_to_json(action_space),
        "first_partial": bool(first_partial), "episodes": episodes.summary(),
        "reference_returns": dict(reference_returns) if reference_returns else None,
        "provenance": dict(provenance), "columns": {name: entries[name] for name in COLUMNS},
    }
    if frames is not None:
        manifest["frames"] = frames
    algorithm = algorithm_in_use()
    manifest["seal"] = {"algorithm": algorithm, "digest": digest([_canonical(manifest)], algorithm)}
    return manifest


def write_dataset(
    path: str | Path,
    columns: Mapping[str, Any],
    observation_space: spaces.Space[Any],
    action_space: spaces.Space[Any],
    env_id: str,
    provenance: Mapping[str, Any],
    reference_returns: Mapping[str, float] | None = None,
    first_partial: bool = False,
    overwrite: bool = False,
) -> Dataset:
    """Write ``columns`` (:data:`COLUMNS`, one row per transition) as a dataset at ``path`` and open it.
    ``obs`` and ``next_obs`` given as :class:`~rlpipe.data.dataset.frames.FrameStacks` are kept so
    (format 2: each frame once), arrays as arrays.

    ``env_id``: the env the data came from; ``provenance``: where it came from (source, preset, seed,
    commit, checkpoint digest, parents), JSON data; ``reference_returns``: ``random`` and ``expert``
    returns for normalised scores; ``first_partial``: each env's first rows continue an episode
    begun before the data (a replay buffer that wrapped around). An existing ``path`` is refused
    unless ``overwrite``; nothing is replaced until the new dataset is complete.
    """
    path = Path(path)
    if path.exists() and not overwrite:
        raise DatasetError(f"{path} already exists: choose another --out, or pass --overwrite to replace it")
    stored = _prepared(columns, observation_space, action_space, env_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        files = {name: values.index if isinstance(values, FrameStacks) else values for name, values in stored.items()}
        if isinstance(stored["obs"], FrameStacks):
            files[FRAMES_FILE] = stored["obs"].frames
        entries = {}
        for name, values in files.items():
            file = staging / (name if name == FRAMES_FILE else f"{name}.npy")
            np.save(file, values, allow_pickle=False)
            entries[name] = {"file": file.name, "dtype": str(values.dtype), "shape": list(values.shape),
                             "sha256": file_sha256(file)}
        manifest = _sealed_manifest(stored, entries, observation_space, action_space, env_id, provenance,
                                    reference_returns, first_partial)
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
        if path.exists():
            shutil.rmtree(path)
        os.replace(staging, path)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return Dataset.open(path)


def dataset_in_memory(
    origin: str,
    columns: Mapping[str, np.ndarray],
    observation_space: spaces.Space[Any],
    action_space: spaces.Space[Any],
    env_id: str,
    provenance: Mapping[str, Any],
    reference_returns: Mapping[str, float] | None = None,
) -> Dataset:
    """A dataset of ``columns`` held in memory (read from another format, e.g. Minari's), named ``origin``;
    its manifest's digests are of the arrays' bytes, so its seal still names exactly this data."""
    if holds_frame_stacks(columns):
        raise DatasetError(f"{origin}: a dataset in memory holds arrays, not frame stacks")
    stored = _prepared(columns, observation_space, action_space, env_id)
    entries = {name: {"file": None, "dtype": str(values.dtype), "shape": list(values.shape),
                      "sha256": hashlib.sha256(values.data).hexdigest()} for name, values in stored.items()}
    manifest = _sealed_manifest(stored, entries, observation_space, action_space, env_id, provenance,
                                reference_returns, first_partial=False)
    for values in stored.values():
        values.flags.writeable = False
    return Dataset(Path(origin), manifest, stored)
