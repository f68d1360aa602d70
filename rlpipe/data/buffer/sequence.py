"""SequenceBuffer: replay of fixed-length sequences of steps for recurrent agents (R2D2,
Kapturowski et al. 2019).

Steps are pushed as the collector hands them (rows of successive vector steps, each with its
``env_id``) into a ring of ``size`` rows. Each env's episodes are cut into sequences of
``sequence_len`` (T) steps starting every ``stride`` steps (R2D2: T = burn-in + unroll, stride
T / 2, so sequences overlap by half). A sequence never crosses an episode's end: the last ones
of an episode are shorter, padded and masked. A sample is a batch of whole sequences:

=============== ================ =====================================================
key             shape            what
=============== ================ =====================================================
each column     [B, T, ...]      every pushed column but ``core_state`` (padding: 0)
``mask``        bool [B, T]      True on real steps, False on padding
``core_state``  float32 [B, S]   the recurrent state at each sequence's first step
``weight``      float32 [B]      importance-sampling weights (``priority=True`` only)
=============== ================ =====================================================

Under priority replay a new sequence enters at the largest priority seen, or, when the pushed rows
carry an ``initial_td`` column (each step's ``|TD error|`` as the collector estimated it: Ape-X's
actor-side priorities), at R2D2's ``eta * max + (1 - eta) * mean`` of its steps' values.

A sample also gives ``indices`` int64 [B], the sequences' ids (monotonic; an id that is gone matches nothing),
which :meth:`update_priority` takes back with one priority per sequence. Values are numpy arrays,
or torch tensors (every key) when the first push gave some columns as tensors.

Costs: a push is O(rows pushed); a sample is O(B * T) with no sort or scan of the buffer, however
large: the per-sequence table (:mod:`rlpipe.data.buffer.sequence_index`) is kept up to date on push
and overwrite, and a batch is gathered by index arithmetic. Priority replay (``priority=True``) is
built in, over sequences; the buffer takes no middleware.
"""

from __future__ import annotations

import json
import math
import operator
import threading
import zipfile
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import torch

from rlpipe.data.buffer.base import (
    Buffer,
    BufferedData,
    Middleware,
    SampledBatch,
    check_size,
    index_array,
)
from rlpipe.data.buffer.persist import BufferFileError, write_npz
from rlpipe.data.buffer.sequence_columns import INITIAL_TD, StepColumns, check_batch
from rlpipe.data.buffer.sequence_episodes import EpisodeTracker
from rlpipe.data.buffer.sequence_index import SequenceIndex
from rlpipe.errors import first_line

FORMAT = "rlpipe.sequence_buffer/1"
PUSH_CHUNK = 1 << 16
"""Rows followed at once in a large push (bounds the temporary arrays; the result is the same)."""


def _whole(value: Any, name: str, low: int) -> int:
    """``value`` as an int >= ``low``; ValueError naming argument ``name`` otherwise."""
    try:
        number = operator.index(value)
    except TypeError:
        number = None
    if number is None or isinstance(value, bool) or number < low:
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    return number


class SequenceBuffer(Buffer):
    """Sequences of ``sequence_len`` steps over a ring of ``size`` steps (see the module docstring).

    ``stride``: steps between the starts of two sequences of an episode (default ``sequence_len // 2``).
    ``seed`` seeds sampling. ``priority``: draw sequences in proportion to ``p ** priority_alpha``
    (stratified, as :class:`PriorityExperienceReplay`), new ones at the largest priority seen, with
    IS weights of exponent ``priority_beta`` (the attribute ``beta``, which a schedule may change);
    ``priority_eta`` mixes the ``initial_td`` of a new sequence's steps into its priority.
    """

    def __init__(
        self,
        size: int,
        sequence_len: int,
        stride: int | None = None,
        seed: int | None = None,
        priority: bool = False,
        priority_alpha: float = 0.6,
        priority_beta: float = 0.4,
        priority_eta: float = 0.9,
    ) -> None:
        size = _whole(size, "size", 1)
        self.sequence_len = _whole(sequence_len, "sequence_len", 1)
        if self.sequence_len > size:
            raise ValueError(f"sequence_len must be <= size ({size}), got {sequence_len}")
        self.stride = max(self.sequence_len // 2, 1) if stride is None else _whole(stride, "stride", 1)
        if self.stride > self.sequence_len:
            raise ValueError(f"stride must be <= sequence_len ({self.sequence_len}), got {stride}")
        if not (math.isfinite(priority_alpha) and priority_alpha >= 0):
            raise ValueError(f"priority_alpha must be finite and >= 0, got {priority_alpha}")
        if not 0 <= priority_beta <= 1:
            raise ValueError(f"priority_beta must be in [0, 1], got {priority_beta}")
        if not 0 <= priority_eta <= 1:
            raise ValueError(f"priority_eta must be in [0, 1], got {priority_eta}")
        super().__init__(size)
        self.eta = float(priority_eta)
        self.priority, self.alpha, self.beta = bool(priority), float(priority_alpha), float(priority_beta)
        self.rng = np.random.default_rng(seed)
        self.lock = threading.RLock()
        self._columns = StepColumns(size)
        self._episodes = EpisodeTracker(self.sequence_len, self.stride)
        self._index = SequenceIndex(size, self.sequence_len, self.stride, self.alpha if self.priority else None)
        self._next_row = 0
        self._row_base = 0
        """The first row id after the last clear."""

    @property
    def has_priority_replay(self) -> bool:
        """Whether sequences are drawn by priority (``priority=True``)."""
        return self.priority

    def use(self, middleware: Middleware) -> Buffer:
        raise NotImplementedError("SequenceBuffer takes no buffer middleware: its priority replay is built in "
                                  "(SequenceBuffer(..., priority=True))")

    def view(self) -> Buffer:
        raise NotImplementedError("SequenceBuffer has no views: sample the buffer itself")

    # ---- push ----------------------------------------------------------------------
    def push(self, data: Any, meta: dict[str, Any] | None = None) -> BufferedData:
        """Store one step (a dict of one row's values); returns it with its row id."""
        if not isinstance(data, Mapping):
            raise ValueError(f"SequenceBuffer.push takes a dict of one step's columns, got {type(data).__name__}")
        row = {key: (value.unsqueeze(0) if isinstance(value, torch.Tensor) else np.asarray(value)[None])
               for key, value in data.items()}
        ids = self.push_batch(row, None if meta is None else {key: np.asarray([value]) for key, value in meta.items()})
        return BufferedData(data, int(ids[0]), meta if meta is not None else {})

    def push_batch(self, batch: Mapping[str, Any], meta: Mapping[str, Any] | None = None) -> np.ndarray:
        """Store the rows of a columnar batch (rows of one env in time order); returns their int64 row ids.

        Needs ``env_id`` (int [N]), ``terminated`` and ``truncated`` (bool [N]); ``core_state``, if
        pushed, is float [N, S]; every column is numeric, and each push has the first push's columns.
        A batch that does not fit is a ValueError naming the column, and stores nothing. ``meta``
        (e.g. the data pusher's ``env``) is checked for its length and not stored: ``env_id`` groups.
        """
        with self.lock:
            arrays, n = check_batch(batch, meta)
            self._columns.fit(arrays, batch)
            first = self._next_row
            for start in range(0, n, PUSH_CHUNK):
                self._push_rows({key: value[start : start + PUSH_CHUNK] for key, value in arrays.items()})
            return np.arange(first, first + n, dtype=np.int64)

    def _push_rows(self, arrays: Mapping[str, np.ndarray]) -> None:
        """Follow the episodes through these rows, retire overwritten sequences, add completed ones."""
        n, first, size = len(arrays["env_id"]), self._next_row, self.size
        done = arrays["terminated"] | arrays["truncated"]
        completed = self._episodes.push(arrays["env_id"].astype(np.int64, copy=False), done, first)
        oldest_before, oldest = self._oldest_row(), max(self._row_base, first + n - size)
        if oldest > oldest_before:  # stored rows now overwritten (the new ones dropped at once never were)
            self._index.forget_rows(np.arange(oldest_before, min(oldest, first)) % size)
        keep = completed.first_row >= oldest
        written = max(first, oldest)
        self._columns.write(np.arange(written, first + n) % size, arrays, written - first)
        self._index.add(completed.first_row[keep] % size, completed.length[keep], completed.flat_rows(keep) % size,
                        self._initial_priorities(completed.rows[keep]))
        self._next_row = first + n

    def _initial_priorities(self, rows: np.ndarray) -> np.ndarray | None:
        """Priorities of new sequences (row ids ``rows`` [M, T], -1 after their ends) from their steps'
        ``initial_td``: ``eta * max + (1 - eta) * mean``; None without priority replay or that column."""
        if not self.priority or INITIAL_TD not in self._columns.columns:
            return None
        real = rows >= 0
        td = np.where(real, self._columns.column_at(INITIAL_TD, rows % self.size), 0.0)
        return self.eta * td.max(axis=1) + (1.0 - self.eta) * td.sum(axis=1) / real.sum(axis=1)

    def _oldest_row(self) -> int:
        return max(self._row_base, self._next_row - self.size)

    # ---- sample --------------------------------------------------------------------
    def _check_unroll(self, unroll_len: int | None) -> None:
        if unroll_len is not None and unroll_len != self.sequence_len:
            raise ValueError(f"unroll_len {unroll_len} does not match this SequenceBuffer, which holds sequences of "
                             f"sequence_len {self.sequence_len}")

    def count_runs(self, unroll_len: int, groupby: str | None = None) -> int:
        """Sequences available for sampling (``unroll_len`` must be ``sequence_len``; ``groupby`` is
        ignored: sequences are always per env and episode)."""
        self._check_unroll(unroll_len)
        return self._index.count

    def sample_batch(
        self,
        size: int,
        replace: bool = False,
        indices: np.ndarray | None = None,
        groupby: str | None = None,
        unroll_len: int | None = None,
        **kwargs: Any,
    ) -> SampledBatch:
        """``size`` sequences collated as the module docstring shows; ValueError if fewer are stored.

        ``indices`` (sequence ids) picks them instead (no IS weights then: nothing was drawn).
        ``unroll_len``, if given, must be ``sequence_len``; ``groupby`` is ignored.
        """
        if kwargs:
            raise TypeError(f"SequenceBuffer.sample_batch got unexpected arguments: {', '.join(kwargs)}")
        self._check_unroll(unroll_len)
        with self.lock:
            if indices is not None:
                ids = index_array(indices, copy=True).reshape(-1)
                slots = self._slots_of(ids)
                return SampledBatch(self._gather(slots), ids)
            slots, weights = self._draw(size, replace, False)
            batch = self._gather(slots)
            if weights is not None:  # a tensor when the columns are: the batch stays of one kind
                batch["weight"] = torch.from_numpy(weights) if self.holds_tensors else weights
            return SampledBatch(batch, self._index.ids[slots])

    def _draw(self, size: int, replace: bool, ignore_insufficient: bool) -> tuple[np.ndarray, np.ndarray | None]:
        n = check_size(size, self._index.count, replace, ignore_insufficient, "sequences")
        return self._index.draw(self.rng, n, replace, self.beta)

    def _slots_of(self, ids: np.ndarray) -> np.ndarray:
        slots, exists = self._index.locate(ids)
        if not exists.all():
            missing = ids[~exists]
            raise ValueError(f"{len(missing)} indices are not stored sequences, e.g. {int(missing[0])}")
        return slots

    @property
    def holds_tensors(self) -> bool:
        """Whether some columns were pushed as torch tensors: samples are then tensors, every key."""
        return bool(self._columns.torch_fields)

    def _gather(self, slots: np.ndarray) -> dict[str, Any]:
        """The sequences at ``slots``: [B, T, ...] per column, the mask, the first steps' core_state."""
        rows, mask = self._index.rows_of(slots)
        out: dict[str, Any] = self._columns.gather(rows)
        out["mask"] = mask
        if self.holds_tensors:
            out = {key: torch.from_numpy(value) for key, value in out.items()}
        return out

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
    ) -> list[Any]:
        """Sequences as items (seed API): one :class:`BufferedData` per sequence, its data as one
        row of :meth:`sample_batch` (columns [T, ...]), with ``meta["priority"]`` (and, when drawn,
        ``meta["priority_IS"]``) under priority replay. ``sample_range`` has no meaning here."""
        if kwargs or sample_range is not None:
            raise TypeError(f"SequenceBuffer.sample got unexpected arguments: "
                            f"{', '.join([*kwargs, *(['sample_range'] if sample_range is not None else [])])}")
        self._check_unroll(unroll_len)
        with self.lock:
            weights = None
            if indices is not None:
                if size is not None:
                    raise ValueError("give either size or indices to sample, not both")
                ids = index_array(list(indices) if not isinstance(indices, np.ndarray) else indices).reshape(-1)
                slots, exists = self._index.locate(ids)
                if not ignore_insufficient:
                    self._slots_of(ids)
                slots = slots[exists]
            elif size is None:
                raise ValueError("sample needs size or indices")
            else:
                slots, weights = self._draw(size, replace, ignore_insufficient)
            items = self._items(slots)
            if weights is not None:
                for item, weight in zip(items, weights.tolist(), strict=True):
                    item.meta["priority_IS"] = weight
            return items

    def _items(self, slots: np.ndarray) -> list[BufferedData]:
        batch = self._gather(slots)
        ids = self._index.ids[slots].tolist()
        priorities = self._index.priority_of(slots).tolist() if self.priority else [None] * len(ids)
        return [
            BufferedData({key: value[i] for key, value in batch.items()}, index,
                         {} if priority is None else {"priority": priority})
            for i, (index, priority) in enumerate(zip(ids, priorities, strict=True))
        ]

    # ---- priorities, update, delete ----------------------------------------------------
    def update_priority(self, indices: Any, priority: Any) -> None:
        """Set the priorities of the sequences with ``indices`` still stored (one per sequence, [B]);
        others are skipped. A no-op without ``priority=True``."""
        with self.lock:
            super().update_priority(indices, priority)

    def _update_priority(self, indices: np.ndarray, priority: np.ndarray) -> None:
        if self.priority:
            self._index.set_priority(indices, priority)

    def update(self, index: int, data: Any = None, meta: dict[str, Any] | None = None) -> bool:
        """Only a sequence's priority may change (``meta={"priority": p}``, the seed's spelling): the
        steps are read-only. Returns whether ``index`` is a stored sequence."""
        if data is not None or meta is None or meta.keys() != {"priority"}:
            raise NotImplementedError("SequenceBuffer stores steps read-only: only meta 'priority' can be updated")
        return bool(self.update_batch(np.array([index]), {"priority": np.array([meta["priority"]])})[0])

    def update_batch(self, indices: np.ndarray, meta: Mapping[str, np.ndarray]) -> np.ndarray:
        """Set priorities (``meta={"priority": [B]}``); returns which indices are stored sequences."""
        if meta.keys() != {"priority"}:
            raise NotImplementedError("SequenceBuffer stores steps read-only: only meta 'priority' can be updated "
                                      "(update_priority is the usual way)")
        with self.lock:
            ids = index_array(indices).reshape(-1)
            exists = self._index.locate(ids)[1]
            self._update_priority(ids, np.asarray(meta["priority"], dtype=np.float64).reshape(-1))
            return exists

    def delete(self, index: int | Iterable[int]) -> None:
        """Make the sequences with these ids unavailable (their steps stay until overwritten)."""
        with self.lock:
            self._index.remove(index_array(np.atleast_1d(np.asarray(index))).reshape(-1))

    def clear(self) -> None:
        """Forget every step, sequence and open episode (ids keep counting up)."""
        with self.lock:
            self._index.clear()
            self._episodes.clear()
            self._row_base = self._next_row

    # ---- lookup --------------------------------------------------------------------
    def count(self) -> int:
        """Steps (rows) stored."""
        return self._next_row - self._oldest_row()

    def get(self, idx: int) -> BufferedData:
        """The ``idx``-th available sequence, oldest first (negative counts from the newest)."""
        with self.lock:
            slots = self._index.ordered_slots()
            if not -len(slots) <= idx < len(slots):
                raise IndexError(f"sequence {idx} out of range for a buffer of {len(slots)} sequences")
            return self._items(slots[[idx]])[0]

    def get_by_index(self, index: int) -> BufferedData:
        """The sequence with this id; KeyError if it is gone or never was."""
        with self.lock:
            slots, exists = self._index.locate(np.array([index], dtype=np.int64))
            if not exists[0]:
                raise KeyError(f"index {index!r} is not a stored sequence")
            return self._items(slots)[0]

    # ---- persistence -----------------------------------------------------------------
    def save_data(self, file_name: str) -> None:
        """Write steps, sequence table, priorities, open episodes and RNG state to one .npz file
        (a JSON header and arrays, no pickle; atomically: a temp file, then a rename)."""
        with self.lock:
            slots = np.arange(self._oldest_row(), self._next_row) % self.size
            arrays = {f"rows/{key}": value for key, value in self._columns.take(slots).items()}
            index_state: dict[str, Any] = {}
            for key, value in self._index.state_dict().items():
                if isinstance(value, np.ndarray):
                    arrays[f"index/{key}"] = value
                else:
                    index_state[key] = value
            arrays |= {f"episodes/{key}": value for key, value in self._episodes.state_dict().items()}
            header = {"format": FORMAT, **self._settings(), "next_row": self._next_row, "row_base": self._row_base,
                      "rng": self.rng.bit_generator.state, "index": index_state,
                      "torch": sorted(self._columns.torch_fields),
                      "columns": [[key, dtype.str, list(shape)] for key, dtype, shape in self._columns.specs]}
            arrays["__header__"] = np.array(json.dumps(header))
            write_npz(file_name, arrays)

    def _settings(self) -> dict[str, Any]:
        return {"size": self.size, "sequence_len": self.sequence_len, "stride": self.stride,
                "priority": self.priority, "priority_alpha": self.alpha}

    def load_data(self, file_name: str) -> None:
        """Replace this buffer's contents with what :meth:`save_data` wrote (same settings); a damaged or
        foreign file is a one-line :class:`BufferFileError`, and the buffer is left as it was."""
        with self.lock:
            try:
                with np.load(file_name, allow_pickle=False) as npz:
                    if "__header__" not in npz.files:
                        raise BufferFileError(f"{file_name} is not a saved rlpipe buffer (no __header__)")
                    header = json.loads(str(npz["__header__"]))
                    if not isinstance(header, dict) or header.get("format") != FORMAT:
                        found = header.get("format") if isinstance(header, dict) else None
                        raise BufferFileError(f"{file_name} has format {found!r}, expected {FORMAT!r}")
                    saved = {key: header.get(key) for key in self._settings()}
                    if saved != self._settings():
                        raise BufferFileError(f"{file_name} holds a SequenceBuffer with {saved}, this one has "
                                              f"{self._settings()}")
                    arrays = {name: npz[name] for name in npz.files}
                self._restore(header, arrays)
            except BufferFileError:
                raise
            except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile) as err:
                raise BufferFileError(f"buffer file {file_name} is damaged or not an rlpipe sequence buffer "
                                      f"({first_line(err)[:160]})") from None

    def _restore(self, header: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> None:
        """Build every part from the file first, then swap them in: a misfit changes nothing."""
        next_row, row_base = int(header["next_row"]), int(header["row_base"])
        if not 0 <= row_base <= next_row:
            raise ValueError(f"row counters {row_base}, {next_row} are inconsistent")
        slots = np.arange(max(row_base, next_row - self.size), next_row) % self.size
        specs = [(str(key), np.dtype(dtype), tuple(shape)) for key, dtype, shape in header["columns"]]
        values = {key: arrays[f"rows/{key}"] for key, _, _ in specs}
        columns = StepColumns.restore(self.size, specs, values, slots, header["torch"])
        episodes = EpisodeTracker(self.sequence_len, self.stride)
        episodes.load_state_dict({key.split("/", 1)[1]: value for key, value in arrays.items()
                                  if key.startswith("episodes/")})
        index = SequenceIndex(self.size, self.sequence_len, self.stride, self.alpha if self.priority else None)
        index.load_state_dict({**header["index"], **{key.split("/", 1)[1]: value for key, value in arrays.items()
                                                     if key.startswith("index/")}})
        rng = np.random.default_rng()
        rng.bit_generator.state = header["rng"]
        self._columns, self._episodes, self._index, self.rng = columns, episodes, index, rng
        self._next_row, self._row_base = next_row, row_base
