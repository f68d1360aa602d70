"""A config's dataset (``offline.dataset``): opened, checked against the env and the run, and made the
buffer the learner samples."""
from __future__ import annotations

import math
from pathlib import Path

import gymnasium as gym
import numpy as np

from rlpipe.config import Config, ConfigError
from rlpipe.config.algorithms import ALGORITHMS
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
    if filled.offline.return_range is not None:
        filled.policy.learn.reward_scale = _reward_scale_for_range(cfg, dataset, filled.offline.return_range)
    return filled, dataset


def _reward_scale_for_range(cfg: Config, dataset: Dataset, return_range: float) -> float:
    """``return_range / (max - min)`` of the dataset's whole episodes' returns (IQL's normalisation); one line
    naming the key when the dataset cannot give it, the algorithm learns from no rewards, or the config already
    scales rewards otherwise (a resumed run's filled-in scale is this one)."""
    if not ALGORITHMS[cfg.policy.type].learns_from_rewards:
        raise ConfigError(f"config key 'offline.return_range': policy.type '{cfg.policy.type}' learns from no "
                          "rewards")
    returns = dataset.episodes().returns
    spread = float(np.max(returns) - np.min(returns)) if len(returns) >= 2 else 0.0
    if not spread > 0:
        raise ConfigError(f"config key 'offline.return_range': dataset {dataset.path} needs two whole episodes "
                          f"of different returns to scale by their range ({len(returns)} whole episodes)")
    scale = return_range / spread
    given = cfg.policy.learn.reward_scale
    if given != 1.0 and not math.isclose(given, scale, rel_tol=1e-12):
        raise ConfigError(f"config key 'offline.return_range' sets policy.learn.reward_scale to {scale:.6g} from "
                          f"the dataset's returns; drop policy.learn.reward_scale={given:g} or offline.return_range")
    return scale


def dataset_buffer(cfg: Config, dataset: Dataset, online: DequeBuffer | None) -> DatasetBuffer:
    """The buffer the learner samples ``dataset`` from: seeded from the run's seed offline; sharing the
    online buffer's generator offline-to-online, so that buffer's saved state resumes both."""
    return DatasetBuffer(dataset, seed=cfg.seed, rng=None if online is None else online.rng)
