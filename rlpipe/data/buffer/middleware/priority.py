"""Prioritized experience replay (Schaul et al., 2016) as buffer middleware.

An item is drawn with probability ``P(i) = p_i^alpha / sum_k p_k^alpha`` (``p_i`` its
priority, ``alpha`` = ``priority_power_factor``), by stratified search of a vectorised sum
tree. Importance-sampling weights correct the bias:
``w_i = (N P(i))^-beta / max_k (N P(k))^-beta = (p_i^alpha / min_k p_k^alpha)^-beta``, where
``beta`` (``IS_weight_power_factor``) grows linearly to 1 over
``IS_weight_anneal_train_iter`` sample calls.

New items get ``meta["priority"]`` if given, else the largest priority seen so far. The
learner sets new priorities with ``update``/``update_batch`` and ``meta={"priority": ...}``.
Sampling with ``indices``, ``groupby``, ``unroll_len`` or ``sample_range`` passes through
uniformly. The tree follows the operations of the buffer this middleware is used on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rlpipe.data.buffer.base import BufferedData, BufferMiddleware, Chain, SampledBatch
from rlpipe.data.buffer.deque_buffer import DequeBuffer, batch_length, check_size
from rlpipe.data.buffer.middleware.sum_tree import SumTree

PRIORITY_EPS = 1e-6
"""Added to every priority so an item with zero TD error can still be drawn."""


class PriorityExperienceReplay(BufferMiddleware):
    """Priority sampling, IS weights (``weight`` field / ``meta["priority_IS"]``) and priority updates."""

    def __init__(
        self,
        buffer: DequeBuffer,
        IS_weight: bool = True,
        priority_power_factor: float = 0.6,
        IS_weight_power_factor: float = 0.4,
        IS_weight_anneal_train_iter: float = int(1e5),
    ) -> None:
        if priority_power_factor < 0:
            raise ValueError(f"priority_power_factor must be >= 0, got {priority_power_factor}")
        if not 0 <= IS_weight_power_factor <= 1:
            raise ValueError(f"IS_weight_power_factor must be in [0, 1], got {IS_weight_power_factor}")
        if IS_weight_anneal_train_iter <= 0:
            raise ValueError(f"IS_weight_anneal_train_iter must be > 0, got {IS_weight_anneal_train_iter}")
        self.buffer = buffer
        self.IS_weight = IS_weight
        self.alpha = float(priority_power_factor)
        self.beta0 = float(IS_weight_power_factor)
        self.anneal_iters = float(IS_weight_anneal_train_iter)
        self.tree = SumTree(buffer.size, track_min=IS_weight)
        self.max_priority = 1.0
        self.sample_calls = 0

    @property
    def beta(self) -> float:
        """The IS exponent the next sample call uses."""
        return min(1.0, self.beta0 + (1.0 - self.beta0) * self.sample_calls / self.anneal_iters)

    def _set_priority(self, ids: np.ndarray, priority: Any) -> None:
        """Set the tree leaves of those of ``ids`` still stored to ``priority``."""
        priority = np.asarray(priority, dtype=np.float64).reshape(-1)
        slots, exists, _ = self.buffer.storage.locate(ids)
        top = self.tree.update_priorities(slots, priority, exists, self.alpha, PRIORITY_EPS)
        self.max_priority = max(self.max_priority, top)

    def _draw(self, n: int) -> tuple[np.ndarray, np.ndarray | None]:
        """``n`` indices by stratified priority search, and their IS weights (float32, if kept)."""
        u = self.buffer.rng.random(n)
        if self.IS_weight:
            slots, weights = self.tree.stratified_weights(u, self.beta)
        else:
            slots, weights = self.tree.stratified(u)[0], None
        self.sample_calls += 1
        return self.buffer.storage.ids[slots], weights

    # ---- chain links ---------------------------------------------------------------
    def push(self, chain: Chain, data: Any, meta: dict[str, Any] | None) -> BufferedData:
        meta = dict(meta or {})
        meta.setdefault("priority", self.max_priority)
        item = chain(data, meta)
        self._set_priority(np.array([item.index]), meta["priority"])
        return item

    def push_batch(
        self, chain: Chain, batch: Mapping[str, np.ndarray], meta: Mapping[str, np.ndarray] | None
    ) -> np.ndarray:
        meta = dict(meta or {})
        if "priority" not in meta:
            meta["priority"] = np.full(batch_length(batch), self.max_priority)
        ids = chain(batch, meta)
        self._set_priority(ids, meta["priority"])  # a batch larger than the ring keeps its tail
        return ids

    def sample(self, chain: Chain, **kwargs: Any) -> list[Any]:
        uniform = any(kwargs.get(key) is not None for key in ("indices", "groupby", "sample_range"))
        if uniform or kwargs.get("unroll_len") not in (None, 1) or kwargs.get("size") is None:
            return chain(**kwargs)
        count = self.buffer.count()
        n = check_size(
            kwargs["size"], count, kwargs.get("replace", False), kwargs.get("ignore_insufficient", False)
        )
        ids, weights = self._draw(n)
        items = chain(**{**kwargs, "size": None, "indices": ids})
        if weights is not None:
            for item, weight in zip(items, weights.tolist(), strict=True):
                item.meta["priority_IS"] = weight
        return items

    def sample_batch(self, chain: Chain, **kwargs: Any) -> SampledBatch:
        get = kwargs.get
        if get("indices") is not None or get("unroll_len") is not None or get("sample_range") is not None:
            return chain(**kwargs)
        check_size(kwargs["size"], self.buffer.count(), kwargs.get("replace", False), False)
        ids, weights = self._draw(kwargs["size"])
        batch = chain(**{**kwargs, "indices": ids})
        if weights is not None:
            batch.data["weight"] = weights
        return batch

    def update(self, chain: Chain, index: int, data: Any, meta: dict[str, Any] | None) -> bool:
        updated = chain(index, data, meta)
        if updated and meta and "priority" in meta:
            self._set_priority(np.array([index]), meta["priority"])
        return updated

    def update_batch(self, chain: Chain, indices: np.ndarray, meta: Mapping[str, np.ndarray]) -> np.ndarray:
        exists = chain(indices, meta)
        if "priority" in meta:
            self._set_priority(indices, meta["priority"])
        return exists

    def delete(self, chain: Chain, indices: np.ndarray) -> None:
        slots, exists, _ = self.buffer.storage.locate(indices)
        chain(indices)
        self.tree.update(slots[exists], 0.0)

    def clear(self, chain: Chain) -> None:
        chain()
        self.tree.rebuild(np.zeros(self.tree.capacity))
        self.max_priority = 1.0

    # ---- state ---------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            "leaves": self.tree.leaves().copy(),
            "max_priority": self.max_priority,
            "sample_calls": self.sample_calls,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.tree.rebuild(state["leaves"])
        self.max_priority = float(state["max_priority"])
        self.sample_calls = int(state["sample_calls"])
