"""The buffer contract: items, sampled batches, and the middleware chain every buffer runs.

Glossary
--------
index
    A unique int64 id given to an item when it is pushed (a monotonic counter, never a ring
    slot). Once the item is overwritten or deleted, its index matches nothing.
middleware
    A callable ``mw(action, chain, *args, **kwargs)`` wrapped around one buffer operation
    (``action`` is the operation's name). It may change the arguments, call ``chain`` (the
    rest of the chain, ending in the buffer's own implementation) and change the result.
    The first middleware added with :meth:`Buffer.use` is the outermost.
priority
    How likely prioritized replay draws an item. Only a middleware keeps priorities (the one
    that declares ``updates_priority``, e.g. ``PriorityExperienceReplay``); a learner sets them
    through :meth:`Buffer.update_priority`, which a buffer without one ignores.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import torch

Chain = Callable[..., Any]
Middleware = Callable[..., Any]

ACTIONS = (
    "push",
    "push_batch",
    "sample",
    "sample_batch",
    "update",
    "update_batch",
    "update_priority",
    "delete",
    "clear",
    "get",
    "get_by_index",
)


def index_array(indices: Any, copy: bool = False) -> np.ndarray:
    """``indices`` (any shape) as int64 (``copy``: never the caller's array); ValueError if they
    are not integers (e.g. strings, floats)."""
    try:
        arr = np.array(indices, copy=True) if copy else np.asarray(indices)
    except ValueError:  # ragged nesting
        arr = np.asarray(None)
    if arr.dtype != np.int64:
        if arr.dtype.kind not in "iu" and arr.size:
            raise ValueError(
                f"indices must be integers (the indices push returned), got {arr.dtype} values like "
                f"{arr.reshape(-1)[0]!r}"
            )
        arr = arr.astype(np.int64)
    return arr


def priority_array(priority: Any, shape: tuple[int, ...]) -> np.ndarray:
    """``priority`` as float64 of ``shape``, the indices' shape: given in that shape, in shape
    ``shape[:1]`` (one per sequence of a [B, T] batch, repeated over T), or as one number."""
    if isinstance(priority, torch.Tensor):
        priority = priority.numpy(force=True)
    values = np.asarray(priority, dtype=np.float64)
    if values.shape == shape:
        return values
    if values.ndim == 0 or (len(shape) > 1 and values.shape == shape[:1]):
        return np.broadcast_to(values.reshape(values.shape + (1,) * (len(shape) - values.ndim)), shape)
    raise ValueError(
        f"priority has shape {values.shape}, indices have shape {shape}: give one priority per index, "
        f"or one per sequence (shape {shape[:1]})"
    )


@dataclass
class BufferedData:
    """One stored item as the item API returns it: the data, its index and its meta dict."""

    data: Any
    index: int
    meta: dict[str, Any] = field(default_factory=dict)


class SampledBatch(NamedTuple):
    """A collated batch and the indices of its rows.

    ``data``: field -> values with a leading batch dim: a numpy array, or a torch tensor for a
    field pushed as tensors (a numeric field is never an object array).
    """

    data: dict[str, Any]
    indices: np.ndarray


class BufferMiddleware:
    """Base of the stateful middleware: one method per action, each passing through by default.

    Subclasses override the actions they change. ``state_dict``/``load_state_dict`` carry the
    state that :meth:`Buffer.save_data` must keep (numpy arrays and JSON-able values only).
    """

    updates_priority: bool = False
    """True for a middleware that keeps item priorities (see :meth:`Buffer.update_priority`)."""

    def __call__(self, action: str, chain: Chain, *args: Any, **kwargs: Any) -> Any:
        return getattr(self, action)(chain, *args, **kwargs)

    def push(self, chain: Chain, data: Any, meta: dict[str, Any] | None) -> BufferedData:
        return chain(data, meta)

    def push_batch(
        self, chain: Chain, batch: Mapping[str, np.ndarray], meta: Mapping[str, np.ndarray] | None
    ) -> np.ndarray:
        return chain(batch, meta)

    def sample(self, chain: Chain, **kwargs: Any) -> list[Any]:
        return chain(**kwargs)

    def sample_batch(self, chain: Chain, **kwargs: Any) -> SampledBatch:
        return chain(**kwargs)

    def update(self, chain: Chain, index: int, data: Any, meta: dict[str, Any] | None) -> bool:
        return chain(index, data, meta)

    def update_batch(self, chain: Chain, indices: np.ndarray, meta: Mapping[str, np.ndarray]) -> np.ndarray:
        return chain(indices, meta)

    def update_priority(self, chain: Chain, indices: np.ndarray, priority: np.ndarray) -> None:
        chain(indices, priority)

    def delete(self, chain: Chain, indices: np.ndarray) -> None:
        chain(indices)

    def clear(self, chain: Chain) -> None:
        chain()

    def get(self, chain: Chain, idx: int) -> BufferedData:
        return chain(idx)

    def get_by_index(self, chain: Chain, index: int) -> BufferedData:
        return chain(index)

    def state_dict(self) -> dict[str, Any]:
        """State to save with the buffer's data (empty for stateless middleware)."""
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""


class Buffer(ABC):
    """Seed-compatible buffer API; every public operation runs through the middleware chain."""

    def __init__(self, size: int) -> None:
        if int(size) <= 0:
            raise ValueError(f"buffer size must be positive, got {size}")
        self.size = int(size)
        self._middleware: list[Middleware] = []
        self._chains: dict[Chain, Chain] = {}

    def use(self, middleware: Middleware) -> Buffer:
        """Append ``middleware`` to the chain (it runs inside those added before it)."""
        if not callable(middleware):
            raise TypeError(f"middleware must be callable, got {type(middleware).__name__}")
        self._middleware.append(middleware)
        self._chains.clear()
        return self

    @property
    def middleware(self) -> list[Middleware]:
        """The chain, outermost first."""
        return list(self._middleware)

    @property
    def has_priority_replay(self) -> bool:
        """Whether a middleware of the chain keeps priorities (``updates_priority``)."""
        return any(isinstance(mw, BufferMiddleware) and mw.updates_priority for mw in self._middleware)

    def _apply(self, action: str, core: Chain, *args: Any, **kwargs: Any) -> Any:
        """Run ``action`` through the middleware chain, ending in ``core``.

        The chain of each ``core`` is built once (until the next :meth:`use`): a training
        step runs it twice, and rebuilding it cost more than some of the links themselves.
        """
        chain = self._chains.get(core)
        if chain is None:
            chain = self._chains[core] = self._build_chain(action, core)
        return chain(*args, **kwargs)

    def _build_chain(self, action: str, core: Chain) -> Chain:
        chain = core
        for mw in reversed(self._middleware):
            if type(mw).__call__ is BufferMiddleware.__call__:  # bind the action's method directly
                chain = functools.partial(getattr(mw, action), chain)
            else:
                chain = functools.partial(mw, action, chain)
        return chain

    # ---- the seed's item API -----------------------------------------------------
    @abstractmethod
    def push(self, data: Any, meta: dict[str, Any] | None = None) -> BufferedData: ...

    @abstractmethod
    def sample(
        self,
        size: int | None = None,
        indices: Iterable[int] | None = None,
        replace: bool = False,
        sample_range: slice | None = None,
        ignore_insufficient: bool = False,
        groupby: str | None = None,
        unroll_len: int | None = None,
        **kwargs: Any,
    ) -> list[Any]: ...

    @abstractmethod
    def update(self, index: int, data: Any = None, meta: dict[str, Any] | None = None) -> bool: ...

    @abstractmethod
    def delete(self, index: int | Iterable[int]) -> None: ...

    @abstractmethod
    def count(self) -> int: ...

    @abstractmethod
    def clear(self) -> None: ...

    @abstractmethod
    def get(self, idx: int) -> BufferedData: ...

    @abstractmethod
    def get_by_index(self, index: int) -> BufferedData: ...

    @abstractmethod
    def view(self) -> Buffer: ...

    @abstractmethod
    def save_data(self, file_name: str) -> None: ...

    @abstractmethod
    def load_data(self, file_name: str) -> None: ...

    # ---- the columnar fast path ----------------------------------------------------
    @abstractmethod
    def push_batch(
        self, batch: Mapping[str, np.ndarray], meta: Mapping[str, np.ndarray] | None = None
    ) -> np.ndarray: ...

    @abstractmethod
    def sample_batch(
        self, size: int, replace: bool = False, indices: np.ndarray | None = None, **kwargs: Any
    ) -> SampledBatch: ...

    @abstractmethod
    def count_runs(self, unroll_len: int, groupby: str | None = None) -> int: ...

    @abstractmethod
    def update_batch(self, indices: np.ndarray, meta: Mapping[str, np.ndarray]) -> np.ndarray: ...

    def update_priority(self, indices: Any, priority: Any) -> None:
        """Set the priorities of the items with ``indices`` (int ids of any shape, e.g. a sampled
        batch's [B] or [B, T]); ids no longer stored are skipped.

        ``priority`` (array-like or tensor): one per index, one per sequence of a [B, T] batch
        (shape [B]), or one number; another shape is a ValueError naming both. The one channel
        for learned priorities: without priority replay in the chain, nothing happens.
        """
        ids = index_array(indices)
        values = priority_array(priority, ids.shape)
        self._apply("update_priority", self._update_priority, ids.reshape(-1), values.reshape(-1))

    def _update_priority(self, indices: np.ndarray, priority: np.ndarray) -> None:
        """The chain's end: the buffer itself keeps no priorities."""
        return None

    def __len__(self) -> int:
        return self.count()
