"""A config's dataset (``offline.dataset``): opened, checked against the env and the run, and made the
buffer the learner samples."""
from __future__ import annotations

from pathlib import Path

import gymnasium as gym

from rlpipe.config import Config, ConfigError
from rlpipe.data import DequeBuffer
from rlpipe.data.dataset import Dataset, DatasetBuffer, DatasetError
from rlpipe.data.dataset.minari_io import is_minari_source, read_minari
from rlpipe.data.dataset.spaces import spaces_match

__all__ = ["dataset_buffer", "open_dataset", "open_offline_dataset"]

KEY = "offline.dataset"


def open_dataset(source: str | Path) -> Dataset:
    """An rlpipe dataset directory, or a Minari dataset (``minari:ID`` or its directory), opened and verified."""
    return read_minari(source) if is_minari_source(source) else Dataset.open(source)


def _check_fits(dataset: Dataset, observation_space: gym.Space, action_space: gym.Space, env_id: str) -> None:
    """One line naming the key when the dataset's spaces are not the env's (its env id may differ: a
    variant of an env has the same spaces)."""
    for what, space in (("observation", observation_space), ("action", action_space)):
        held = getattr(dataset, f"{what}_space")
        if not spaces_match(held, space):
            raise ConfigError(f"config key '{KEY}': dataset {dataset.path} holds {what}s {held}, env '{env_id}' "
                              f"has {space}")


def open_offline_dataset(cfg: Config, observation_space: gym.Space, action_space: gym.Space) -> tuple[Config, Dataset]:
    """The dataset ``cfg.offline`` names, checked against the env's spaces and, when the config carries one
    (a resumed run), its seal; returns ``cfg`` with the seal filled in."""
    assert cfg.offline is not None
    try:
        dataset = open_dataset(cfg.offline.dataset)
    except DatasetError as err:
        raise ConfigError(f"config key '{KEY}': {err}") from None
    _check_fits(dataset, observation_space, action_space, cfg.env.env_id)
    if cfg.offline.seal is not None and cfg.offline.seal != dataset.seal:
        raise ConfigError(f"config key '{KEY}': dataset {dataset.path} is not the one this run trained on (seal "
                          f"{dataset.seal[:12]}, the run's {cfg.offline.seal[:12]}): it was changed or replaced")
    filled = cfg.model_copy(deep=True)
    assert filled.offline is not None
    filled.offline.seal = dataset.seal
    return filled, dataset


def dataset_buffer(cfg: Config, dataset: Dataset, online: DequeBuffer | None) -> DatasetBuffer:
    """The buffer the learner samples ``dataset`` from: seeded from the run's seed offline; sharing the
    online buffer's generator offline-to-online, so that buffer's saved state resumes both."""
    return DatasetBuffer(dataset, seed=cfg.seed, rng=None if online is None else online.rng)
