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
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

Chain = Callable[..., Any]
Middleware = Callable[..., Any]

ACTIONS = ("push", "push_batch", "sample", "sample_batch", "update", "update_batch", "delete", "clear")


@dataclass
class BufferedData:
    """One stored item as the item API returns it: the data, its index and its meta dict."""

    data: Any
    index: int
    meta: dict[str, Any] = field(default_factory=dict)


class SampledBatch(NamedTuple):
    """A collated batch (field -> array with leading batch dim) and the indices of its rows."""

    data: dict[str, np.ndarray]
    indices: np.ndarray


class BufferMiddleware:
    """Base of the stateful middleware: one method per action, each passing through by default.

    Subclasses override the actions they change. ``state_dict``/``load_state_dict`` carry the
    state that :meth:`Buffer.save_data` must keep (numpy arrays and JSON-able values only).
    """

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

    def delete(self, chain: Chain, indices: np.ndarray) -> None:
        chain(indices)

    def clear(self, chain: Chain) -> None:
        chain()

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

    def __len__(self) -> int:
        return self.count()
