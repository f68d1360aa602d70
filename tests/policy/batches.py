"""Hand-made learning batches for the actor-critic policy tests."""
from __future__ import annotations

import numpy as np


def continuous_batch(seed: int, obs: int, act: int, size: int = 16, **extra: np.ndarray) -> dict[str, np.ndarray]:
    """``size`` random transitions with ``obs``-sized observations and ``act``-sized actions in [-1, 1]."""
    rng = np.random.default_rng(seed)
    batch = {
        "obs": rng.normal(size=(size, obs)).astype(np.float32),
        "action": rng.uniform(-1, 1, size=(size, act)).astype(np.float32),
        "reward": rng.normal(size=size).astype(np.float32),
        "next_obs": rng.normal(size=(size, obs)).astype(np.float32),
        "terminated": rng.random(size) < 0.3,
        "truncated": rng.random(size) < 0.3,
    }
    batch.update(extra)
    return batch
