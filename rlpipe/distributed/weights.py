"""Acting weights in the form Ray's object store carries best: numpy arrays, read without a copy.

Torch tensors go through the store pickled, and unpickling them costs each collector about a
millisecond per broadcast; numpy arrays are mapped from shared memory as they are.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch


def to_numpy(state: Mapping[str, Any]) -> dict[str, Any]:
    """``state`` (nested dicts of tensors and plain values) with every tensor as a numpy array."""
    return {key: to_numpy(value) if isinstance(value, Mapping)
            else value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else value
            for key, value in state.items()}


def to_torch(state: Mapping[str, Any]) -> dict[str, Any]:
    """The inverse of :func:`to_numpy`: every numpy array as a tensor of its own (the store's are read-only)."""
    return {key: to_torch(value) if isinstance(value, Mapping)
            else torch.tensor(value) if isinstance(value, np.ndarray) else value
            for key, value in state.items()}
