"""Minari's datasets, read and written through minari itself (``pip install rlpipe[offline]``).

Reading: ``minari:ID`` is a dataset in minari's local store (``MINARI_DATASETS_PATH``, else
``~/.minari/datasets``; nothing is downloaded), a path is a Minari dataset's directory (the one
holding ``data/``, or ``data/`` itself). Each episode's ``T + 1`` observations become ``T``
rows of ``obs`` and ``next_obs``; each episode gets an ``env_id`` of its own, so its rows stay
one episode whatever the next one is. Writing: a dataset's whole episodes become a Minari
dataset in the local store (HDF5), with the reference returns as ``ref_min_score`` and
``ref_max_score``.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from rlpipe.data.dataset.format import COLUMNS, Dataset, DatasetError, dataset_in_memory
from rlpipe.data.dataset.spaces import spaces_match
from rlpipe.errors import MissingDependencyError, first_line

__all__ = ["MINARI_PREFIX", "is_minari_source", "read_minari", "write_minari"]

MINARI_PREFIX = "minari:"
STORE_VARIABLE = "MINARI_DATASETS_PATH"


def _minari() -> Any:
    try:
        import minari
    except ImportError:
        raise MissingDependencyError("Minari datasets need minari: pip install 'rlpipe[offline]'") from None
    return minari


def is_minari_source(source: str | Path) -> bool:
    """Whether ``source`` names a Minari dataset (``minari:ID``, or a directory of minari's layout)."""
    text = str(source)
    if text.startswith(MINARI_PREFIX):
        return True
    path = Path(text)
    return (path / "data" / "metadata.json").is_file() or (path / "metadata.json").is_file()


def _open_minari(source: str) -> Any:
    minari = _minari()
    try:
        if source.startswith(MINARI_PREFIX):
            return minari.load_dataset(source[len(MINARI_PREFIX):], download=False)
        path = Path(source)
        return minari.MinariDataset(str(path / "data" if (path / "data").is_dir() else path))
    except (FileNotFoundError, ValueError, KeyError, OSError) as err:
        raise DatasetError(f"cannot read Minari dataset {source}: {first_line(err)}") from None


def read_minari(source: str | Path) -> Dataset:
    """The Minari dataset ``source`` as an rlpipe dataset (in memory)."""
    source = str(source)
    data = _open_minari(source)
    for what, space in (("observation", data.observation_space), ("action", data.action_space)):
        if isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple)):
            raise DatasetError(f"Minari dataset {source} has {what}s {space}; rlpipe datasets hold flat ones")
    parts: dict[str, list[np.ndarray]] = {name: [] for name in COLUMNS}
    for index, episode in enumerate(data.iterate_episodes()):
        observations, steps = np.asarray(episode.observations), len(episode.rewards)
        if steps == 0:
            continue
        parts["obs"].append(observations[:-1])
        parts["next_obs"].append(observations[1:])
        parts["action"].append(np.asarray(episode.actions))
        parts["reward"].append(np.asarray(episode.rewards, dtype=np.float32))
        parts["terminated"].append(np.asarray(episode.terminations, dtype=bool))
        parts["truncated"].append(np.asarray(episode.truncations, dtype=bool))
        parts["env_id"].append(np.full(steps, index, dtype=np.int64))
    if not parts["reward"]:
        raise DatasetError(f"Minari dataset {source} holds no steps")
    columns = {name: np.concatenate(values) for name, values in parts.items()}
    metadata = data.storage.metadata
    reference = None
    if metadata.get("ref_min_score") is not None and metadata.get("ref_max_score") is not None:
        reference = {"random": float(metadata["ref_min_score"]), "expert": float(metadata["ref_max_score"])}
    env_id = data.env_spec.id if data.env_spec is not None else str(metadata.get("dataset_id", source))
    provenance = {"source": "minari", "dataset_id": metadata.get("dataset_id"),
                  "minari_version": metadata.get("minari_version")}
    return dataset_in_memory(source, columns, data.observation_space, data.action_space, env_id, provenance,
                             reference)


@contextmanager
def _store(root: str | Path | None) -> Iterator[None]:
    """Minari's local store at ``root`` for the duration (None: the one the environment names)."""
    before = os.environ.get(STORE_VARIABLE)
    if root is not None:
        os.environ[STORE_VARIABLE] = str(root)
    try:
        yield
    finally:
        if root is not None:
            if before is None:
                os.environ.pop(STORE_VARIABLE, None)
            else:
                os.environ[STORE_VARIABLE] = before


def _recreatable_env(dataset: Dataset) -> str | None:
    """The dataset's env id when ``gym.make`` of it has the dataset's spaces (so Minari can recreate it),
    else None (rlpipe's [-1, 1] actions for an env with other bounds, its own envs)."""
    try:
        env = gym.make(dataset.env_id)
    except Exception:  # any registry or import failure: Minari just gets no env spec
        return None
    try:
        same = spaces_match(env.observation_space, dataset.observation_space) and spaces_match(
            env.action_space, dataset.action_space)
        return dataset.env_id if same else None
    finally:
        env.close()


def write_minari(dataset: Dataset, dataset_id: str, root: str | Path | None = None, description: str = "") -> Path:
    """Write ``dataset``'s whole episodes as Minari dataset ``dataset_id`` in minari's local store (at
    ``root`` when given); returns its directory. The env spec is recorded only when ``gym.make`` of the
    dataset's env has its spaces."""
    minari = _minari()
    episodes = dataset.episodes()
    if not episodes.rows:
        raise DatasetError(f"dataset {dataset.path} holds no whole episode to write to Minari")
    from minari.data_collector.episode_buffer import EpisodeBuffer

    c = dataset.columns
    buffers = []
    for index, rows in enumerate(sorted(episodes.rows, key=lambda r: r[0])):  # in the order they start in the rows
        observations = np.concatenate([c["obs"][rows], c["next_obs"][rows[-1:]]])
        buffers.append(EpisodeBuffer(
            id=index, observations=observations, actions=np.asarray(c["action"][rows]),
            rewards=np.asarray(c["reward"][rows], dtype=np.float64), terminations=np.asarray(c["terminated"][rows]),
            truncations=np.asarray(c["truncated"][rows]), infos={}))
    reference = dataset.manifest.get("reference_returns") or {}
    env = _recreatable_env(dataset)
    with _store(root):
        try:
            created = minari.create_dataset_from_buffers(
                dataset_id, buffers, env=env, observation_space=dataset.observation_space,
                action_space=dataset.action_space, algorithm_name="rlpipe", author="rlpipe",
                ref_min_score=reference.get("random"), ref_max_score=reference.get("expert"),
                description=description or f"rlpipe dataset {dataset.path} (seal {dataset.seal[:12]}) of "
                f"{dataset.env_id}", data_format="hdf5")
            if reference and env is None:  # minari records reference scores only beside an env it can make
                created.storage.update_metadata({"ref_min_score": reference["random"],
                                                 "ref_max_score": reference["expert"]})
        except ValueError as err:
            raise DatasetError(f"cannot write Minari dataset '{dataset_id}': {first_line(err)}") from None
        return Path(created.storage.data_path).parent
