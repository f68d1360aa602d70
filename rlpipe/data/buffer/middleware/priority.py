"""Prioritized experience replay (Schaul et al., 2016) as buffer middleware.

An item is drawn with probability ``P(i) = p_i^alpha / sum_k p_k^alpha`` (``p_i`` its
priority, ``alpha`` = ``priority_power_factor``), by stratified search of a vectorised sum
tree. Importance-sampling weights correct the bias:
``w_i = (N P(i))^-beta / max_k (N P(k))^-beta = (p_i^alpha / min_k p_k^alpha)^-beta``, where
``beta`` (``IS_weight_power_factor``) grows linearly to 1 over
``IS_weight_anneal_train_iter`` sample calls.

New items get ``meta["priority"]`` if given, else the largest priority seen so far. The
learner sets new priorities with :meth:`Buffer.update_priority` (the seed's spelling,
``update``/``update_batch`` with ``meta={"priority": ...}``, does the same). Priorities
live in the sum tree only, never in the buffer's meta table (one write per update); the
items that ``get``, ``get_by_index`` and ``sample`` return show the current one as
``meta["priority"]``, read back from the tree. Sampling with ``indices``, ``groupby``,
``unroll_len`` or ``sample_range`` passes through uniformly. The tree follows the
operations of the buffer this middleware is used on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from rlpipe.data.buffer.base import (
    BufferedData,
    BufferMiddleware,
    Chain,
    SampledBatch,
    SlotBuffer,
    batch_length,
    check_size,
    flat_items,
)
from rlpipe.data.buffer.middleware.sum_tree import SumTree

PRIORITY_EPS = 1e-6
"""Added to every priority so an item with zero TD error can still be drawn."""


class PriorityExperienceReplay(BufferMiddleware):
    """Priority sampling, IS weights (``weight`` field / ``meta["priority_IS"]``) and priority updates.

    The ``weight`` field is float32 [B]: a tensor when the buffer holds fields pushed as tensors.
    """

    updates_priority = True

    def __init__(
        self,
        buffer: SlotBuffer,
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
        # A leaf holds (p + eps) ** alpha, so p reads back as leaf ** (1 / alpha) - eps (to a few
        # ulps). With alpha == 0 every leaf is 1 and p is lost: only then are the raw
        # priorities kept too, one float64 per slot, so that meta["priority"] still shows them.
        self.raw_priority = np.zeros(buffer.size) if self.alpha == 0 else None
        self.max_priority = 1.0
        self.sample_calls = 0

    @property
    def beta(self) -> float:
        """The IS exponent the next sample call uses."""
        return min(1.0, self.beta0 + (1.0 - self.beta0) * self.sample_calls / self.anneal_iters)

    @staticmethod
    def _priorities(priority: Any, n: int) -> np.ndarray:
        """``priority`` as ``n`` contiguous float64s; ValueError naming both shapes if it has
        another number of rows, or naming the value if one is negative, NaN or infinite (an
        infinite priority would take every draw and silently end learning)."""
        values = np.asarray(priority, dtype=np.float64)
        if values.size != n or (values.ndim > 0 and values.shape[0] != n):
            raise ValueError(f"priority has shape {values.shape}, indices have shape ({n},)")
        values = np.ascontiguousarray(values.reshape(-1))
        if not (np.isfinite(values).all() and (values >= 0).all()):
            bad = values[~(np.isfinite(values) & (values >= 0))][0]
            raise ValueError(f"priorities must be finite and >= 0, got {bad}")
        return values

    def _set_priority(self, ids: np.ndarray, priority: np.ndarray) -> np.ndarray:
        """Set the tree leaves of those of ``ids`` still stored to ``priority`` (as many
        float64s, checked by :meth:`_priorities`); returns which ids are stored."""
        slots, exists, _ = self.buffer.locate(ids)
        top = self.tree.update_priorities(slots, priority, exists, self.alpha, PRIORITY_EPS)
        self.max_priority = max(self.max_priority, top)
        if self.raw_priority is not None:
            self.raw_priority[slots[exists]] = priority[exists]
        return exists

    def priority_of(self, slots: np.ndarray) -> np.ndarray:
        """The current priorities of the items at ``slots`` (read from the tree).

        Inverting ``(p + eps) ** alpha`` may miss ``p`` by an ulp or two; the float32 value
        nearest the inverse is taken instead when it gives the same leaf, so priorities set
        as float32 (a learner's |TD errors|, the initial 1.0) read back exactly as set.
        """
        if self.raw_priority is not None:
            return self.raw_priority[slots]
        leaves = self.tree.leaves(slots)
        inverse = np.maximum(leaves ** (1.0 / self.alpha) - PRIORITY_EPS, 0.0)
        nearest = inverse.astype(np.float32).astype(np.float64)
        return np.where((nearest + PRIORITY_EPS) ** self.alpha == leaves, nearest, inverse)

    def _show_priority(self, items: list[BufferedData]) -> None:
        """Set ``meta["priority"]`` of those of ``items`` still stored to their current priority."""
        if not items:
            return
        slots, exists, _ = self.buffer.locate(np.array([item.index for item in items], dtype=np.int64))
        for item, priority, stored in zip(items, self.priority_of(slots).tolist(), exists.tolist(), strict=True):
            if stored:
                item.meta["priority"] = priority

    def _draw(self, n: int) -> tuple[np.ndarray, np.ndarray | None]:
        """``n`` indices by stratified priority search, and their IS weights (float32, if kept)."""
        u = self.buffer.rng.random(n)
        if self.IS_weight:
            slots, weights = self.tree.stratified_weights(u, self.beta)
        else:
            slots, weights = self.tree.stratified(u)[0], None
        self.sample_calls += 1
        return self.buffer.ids_at(slots), weights

    # ---- chain links ---------------------------------------------------------------
    # "priority" never goes down the chain as meta: the tree is its one store.
    def push(self, chain: Chain, data: Any, meta: dict[str, Any] | None) -> BufferedData:
        meta = dict(meta or {})
        priority = self._priorities(meta.pop("priority", self.max_priority), 1)
        item = chain(data, meta)
        self._set_priority(np.array([item.index], dtype=np.int64), priority)
        item.meta["priority"] = float(priority[0])
        return item

    def push_batch(
        self, chain: Chain, batch: Mapping[str, np.ndarray], meta: Mapping[str, np.ndarray] | None
    ) -> np.ndarray:
        meta = dict(meta or {})
        n = batch_length(batch)
        given = meta.pop("priority", None)
        priority = np.full(n, self.max_priority) if given is None else self._priorities(given, n)
        ids = chain(batch, meta)
        self._set_priority(ids, priority)  # a batch larger than the ring keeps its tail
        return ids

    def sample(self, chain: Chain, **kwargs: Any) -> list[Any]:
        uniform = any(kwargs.get(key) is not None for key in ("indices", "groupby", "sample_range"))
        if uniform or kwargs.get("unroll_len") not in (None, 1) or kwargs.get("size") is None:
            result = chain(**kwargs)
            self._show_priority(flat_items(result))
            return result
        count = self.buffer.count()
        n = check_size(
            kwargs["size"], count, kwargs.get("replace", False), kwargs.get("ignore_insufficient", False)
        )
        ids, weights = self._draw(n)
        items = chain(**{**kwargs, "size": None, "indices": ids})
        if weights is not None:
            for item, weight in zip(items, weights.tolist(), strict=True):
                item.meta["priority_IS"] = weight
        self._show_priority(items)
        return items

    def sample_batch(self, chain: Chain, **kwargs: Any) -> SampledBatch:
        get = kwargs.get
        if get("indices") is not None or get("unroll_len") is not None or get("sample_range") is not None:
            return chain(**kwargs)
        check_size(kwargs["size"], self.buffer.count(), kwargs.get("replace", False), False)
        ids, weights = self._draw(kwargs["size"])
        batch = chain(**{**kwargs, "indices": ids})
        if weights is not None:  # tensors when the buffer's fields are: the batch stays of one kind
            batch.data["weight"] = torch.from_numpy(weights) if self.buffer.holds_tensors else weights
        return batch

    def update(self, chain: Chain, index: int, data: Any, meta: dict[str, Any] | None) -> bool:
        if not meta or "priority" not in meta:
            return chain(index, data, meta)
        priority = self._priorities(meta["priority"], 1)
        rest = {key: value for key, value in meta.items() if key != "priority"}
        updated = chain(index, data, rest or None)
        if updated:
            self._set_priority(np.array([index], dtype=np.int64), priority)
        return updated

    def update_batch(self, chain: Chain, indices: np.ndarray, meta: Mapping[str, np.ndarray]) -> np.ndarray:
        if "priority" not in meta:
            return chain(indices, meta)
        exists = self._set_priority(indices, self._priorities(meta["priority"], len(indices)))
        rest = {key: value for key, value in meta.items() if key != "priority"}
        if rest:  # with priorities alone (a training step's update) the chain has nothing to write
            chain(indices, rest)
        return exists

    def update_priority(self, chain: Chain, indices: np.ndarray, priority: np.ndarray) -> None:
        self._set_priority(indices, self._priorities(priority, len(indices)))
        chain(indices, priority)

    def get(self, chain: Chain, idx: int) -> BufferedData:
        item = chain(idx)
        self._show_priority([item])
        return item

    def get_by_index(self, chain: Chain, index: int) -> BufferedData:
        item = chain(index)
        self._show_priority([item])
        return item

    def delete(self, chain: Chain, indices: np.ndarray) -> None:
        slots, exists, _ = self.buffer.locate(indices)
        chain(indices)
        self.tree.update(slots[exists], 0.0)

    def clear(self, chain: Chain) -> None:
        chain()
        self.tree.rebuild(np.zeros(self.tree.capacity))
        if self.raw_priority is not None:
            self.raw_priority[:] = 0.0
        self.max_priority = 1.0

    # ---- state ---------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        state = {
            "leaves": self.tree.leaves().copy(),
            "max_priority": self.max_priority,
            "sample_calls": self.sample_calls,
        }
        if self.raw_priority is not None:
            state["raw_priority"] = self.raw_priority.copy()
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.tree.rebuild(state["leaves"])
        if self.raw_priority is not None and "raw_priority" in state:
            self.raw_priority[:] = state["raw_priority"]
        self.max_priority = float(state["max_priority"])
        self.sample_calls = int(state["sample_calls"])
