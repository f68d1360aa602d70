"""Small helpers on columnar batches (``dict[str, np.ndarray]`` with a leading batch dim)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

Batch = dict[str, np.ndarray]


def concat_batches(batches: Sequence[Mapping[str, np.ndarray]]) -> Batch:
    """Concatenate batches with the same fields along the leading dimension."""
    if not batches:
        raise ValueError("concat_batches needs at least one batch")
    return {key: np.concatenate([b[key] for b in batches]) for key in batches[0]}


def num_rows(batch: Mapping[str, np.ndarray]) -> int:
    """Rows in a batch (the leading dimension of its first field)."""
    return len(next(iter(batch.values())))
