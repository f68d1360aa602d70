"""Gymnasium spaces as JSON, so a dataset's manifest says what its columns hold without pickle.

Box, Discrete, MultiBinary and MultiDiscrete, the spaces a transition's flat ``obs`` and
``action`` come in. A Box's bounds are written as one number when every entry shares it
(an image's 0 and 255), else as nested lists.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

__all__ = ["space_from_json", "space_to_json", "spaces_match"]


def _bound(values: np.ndarray) -> Any:
    flat = values.reshape(-1)
    if flat.size and (flat == flat[0]).all():
        return flat[0].item()
    return values.tolist()


def space_to_json(space: spaces.Space[Any]) -> dict[str, Any]:
    """The space as plain JSON data; ``ValueError`` naming it for a space a dataset cannot hold."""
    if isinstance(space, spaces.Box):
        return {"type": "Box", "shape": list(space.shape), "dtype": str(space.dtype),
                "low": _bound(space.low), "high": _bound(space.high)}
    if isinstance(space, spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, spaces.MultiBinary):
        return {"type": "MultiBinary", "n": np.asarray(space.n).tolist()}
    if isinstance(space, spaces.MultiDiscrete):
        return {"type": "MultiDiscrete", "nvec": space.nvec.tolist(), "dtype": str(space.dtype)}
    raise ValueError(f"a dataset holds Box, Discrete, MultiBinary or MultiDiscrete values, not {space}")


def space_from_json(data: dict[str, Any]) -> spaces.Space[Any]:
    """The space :func:`space_to_json` wrote; ``ValueError`` for anything else."""
    kind = data.get("type")
    if kind == "Box":
        shape, dtype = tuple(data["shape"]), np.dtype(data["dtype"])
        low = np.broadcast_to(np.asarray(data["low"], dtype=dtype), shape)
        high = np.broadcast_to(np.asarray(data["high"], dtype=dtype), shape)
        return spaces.Box(low, high, shape, dtype)
    if kind == "Discrete":
        return spaces.Discrete(int(data["n"]), start=int(data.get("start", 0)))
    if kind == "MultiBinary":
        return spaces.MultiBinary(data["n"])
    if kind == "MultiDiscrete":
        return spaces.MultiDiscrete(np.asarray(data["nvec"]), dtype=data.get("dtype", "int64"))
    raise ValueError(f"unknown space type {kind!r}")


def spaces_match(a: spaces.Space[Any], b: spaces.Space[Any]) -> bool:
    """Whether the two spaces hold the same values: type, shape, dtype and bounds (as written to JSON)."""
    try:
        return space_to_json(a) == space_to_json(b)
    except ValueError:
        return False
