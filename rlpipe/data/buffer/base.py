"""The buffer contract: items, sampled batches, the middleware chain every buffer runs, and what
middleware (:class:`SlotBuffer`) and saving (:class:`SavableBuffer`) need of a buffer.

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
slot
    A position ``0 <= slot < size`` in a buffer's preallocated columns. An item keeps its
    slot while it is stored; middleware that keep per-item state (priorities, use counts)
    keep it in arrays of ``size`` entries indexed by slot (see :class:`SlotBuffer`).
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
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

import numpy as np
import torch

from rlpipe.data.buffer.storage import Located

if TYPE_CHECKING:
    from rlpipe.data.buffer.storage import RingStorage

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


def batch_length(batch: Mapping[str, Any], name: str = "batch") -> int:
    """The common leading dimension of ``batch``'s fields; ValueError naming a field that differs."""
    if not isinstance(batch, Mapping) or not batch:
        raise ValueError(f"{name} must be a non-empty mapping of field name to array")
    length = None
    for key, value in batch.items():
        shape = value.shape if isinstance(value, np.ndarray) else np.shape(value)
        if not shape:
            raise ValueError(f"{name} field '{key}' has no batch dimension (shape ())")
        if length is None:
            length = shape[0]
        elif shape[0] != length:
            raise ValueError(f"{name} field '{key}' has {shape[0]} rows, other fields have {length}")
    return int(length)  # type: ignore[arg-type]


def check_size(
    size: int, available: int, replace: bool, ignore_insufficient: bool, what: str = "items"
) -> int:
    """How many to draw: ``size``, or fewer with ``ignore_insufficient``; else ValueError naming both."""
    if size < 0:
        raise ValueError(f"sample size must be >= 0, got {size}")
    if replace:
        if size > 0 and available == 0:
            if ignore_insufficient:
                return 0
            raise ValueError(f"cannot sample {size} {what} with replacement: 0 available")
    elif size > available:
        if ignore_insufficient:
            return available
        raise ValueError(f"cannot sample {size} {what} without replacement: only {available} available")
    return size


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


def flat_items(result: list[Any]) -> list[BufferedData]:
    """The items of a ``sample`` result (a list of items, or of groups or runs of them), in order."""
    return [item for entry in result for item in (entry if isinstance(entry, list) else [entry])]


@runtime_checkable
class SlotBuffer(Protocol):
    """What buffer middleware need of the buffer they are used on (``DequeBuffer`` is one).

    Items are named by their index (id) and live in a slot (see the glossary). The slot
    methods read the buffer's state without taking its lock: middleware call them from
    inside a chain, which runs under it.
    """

    @property
    def size(self) -> int:
        """Number of slots: every slot is in ``range(size)``."""
        ...

    @property
    def rng(self) -> np.random.Generator:
        """The buffer's sampling generator (a middleware that draws uses it, so one seed fixes a run)."""
        ...

    @property
    def holds_tensors(self) -> bool:
        """Whether the buffer returns torch tensors for data fields (some were pushed as tensors)."""
        ...

    def count(self) -> int:
        """Number of stored items."""
        ...

    def delete(self, index: Any) -> None:
        """Remove the items with these indices, through the whole middleware chain."""
        ...

    def locate(self, ids: np.ndarray) -> Located:
        """Slots of ``ids`` (flattened) and whether each still names a stored item."""
        ...

    def ids_at(self, slots: np.ndarray) -> np.ndarray:
        """The indices of the items at ``slots`` (stored ones; any shape)."""
        ...

    def ordered_slots(self) -> np.ndarray:
        """Slots of the stored items, oldest first."""
        ...

    def meta_column(self, key: str, slots: np.ndarray) -> np.ndarray:
        """Meta ``key`` of the items at ``slots``; ValueError naming ``key`` if some lack it."""
        ...


@runtime_checkable
class SavableBuffer(Protocol):
    """What :mod:`rlpipe.data.buffer.persist` needs of a buffer to save and load it."""

    @property
    def storage(self) -> RingStorage:
        """The ring storage whose items, ids and ring position are saved."""
        ...

    @property
    def rng(self) -> np.random.Generator:
        """The sampling generator, whose state is saved."""
        ...

    @property
    def middleware(self) -> list[Middleware]:
        """The chain, outermost first (the stateful ones' state is saved)."""
        ...


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
