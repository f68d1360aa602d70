"""A dataset as the buffer the learner samples: :class:`DatasetBuffer`.

It is a :class:`~rlpipe.data.buffer.DequeBuffer` whose storage is the dataset's memory-mapped
columns (nothing is copied: a batch is gathered from the files' pages), so every sampling path
(single transitions, sequences grouped by env, the seed's ``sample``) is the replay buffer's own.
Observations kept as frame stacks (format 2) are read through the replay buffer's
:class:`~rlpipe.data.buffer.FrameStore`, holding the dataset's frames: stacks are rebuilt per batch.
It is read-only: pushing, updating or deleting is a one-line error.

Saving it (a checkpoint's buffer file) writes no data, only what a resumed run needs to sample
the same batches again: the dataset's seal and the sampling generator's state. Loading checks
that the seal is this dataset's, so a run never resumes on different data.
"""
from __future__ import annotations

import json
import zipfile
from collections.abc import Mapping
from typing import Any

import numpy as np

from rlpipe.data.buffer.base import BufferedData
from rlpipe.data.buffer.deque_buffer import DequeBuffer
from rlpipe.data.buffer.middleware.frame_store import FrameStore
from rlpipe.data.buffer.persist import BufferFileError, write_npz
from rlpipe.data.dataset.format import Dataset, DatasetError
from rlpipe.data.dataset.frames import FrameStacks
from rlpipe.errors import first_line

__all__ = ["SAMPLER_FORMAT", "DatasetBuffer"]

SAMPLER_FORMAT = "rlpipe.dataset-sampler/1"
GROUP_KEY = "env"
"""Meta key of each row's env, which sequence sampling groups by (as the pipeline's pusher writes it)."""


class DatasetBuffer(DequeBuffer):
    """The transitions of ``dataset``, sampled uniformly; ``seed`` seeds the sampling generator, or
    ``rng`` is a generator to share (offline-to-online: the online buffer's, whose saved state
    then resumes both)."""

    def __init__(self, dataset: Dataset, seed: int | None = None, rng: np.random.Generator | None = None) -> None:
        super().__init__(dataset.size, seed)
        if rng is not None:
            self.rng = rng
        self.dataset = dataset
        columns = dict(dataset.columns)
        stacks = {name: column for name, column in columns.items() if isinstance(column, FrameStacks)}
        self.storage.adopt({**columns, **{name: column.index for name, column in stacks.items()}},
                           {GROUP_KEY: dataset.columns["env_id"]})
        if stacks:
            first = next(iter(stacks.values()))
            self.use(FrameStore.reading(self, first.frames, tuple(stacks), first.shape[1:]))

    def _read_only(self, what: str) -> DatasetError:
        return DatasetError(f"dataset {self.dataset.path} is read-only: cannot {what} (push new transitions to an "
                            "online buffer beside it)")

    def push(self, data: Any, meta: dict[str, Any] | None = None) -> BufferedData:
        raise self._read_only("push")

    def push_batch(self, batch: Mapping[str, np.ndarray], meta: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
        raise self._read_only("push")

    def update(self, index: Any, data: Any = None, meta: dict[str, Any] | None = None) -> bool:
        raise self._read_only("update items")

    def update_batch(self, indices: np.ndarray, meta: Mapping[str, np.ndarray]) -> np.ndarray:
        raise self._read_only("update items")

    def delete(self, index: Any) -> None:
        raise self._read_only("delete items")

    def clear(self) -> None:
        raise self._read_only("clear it")

    def save_data(self, file_name: str) -> None:
        """Write the dataset's seal and the sampling generator's state (no transitions) to ``file_name``."""
        header = {"format": SAMPLER_FORMAT, "dataset": str(self.dataset.path), "seal": self.dataset.seal,
                  "rng": self.rng.bit_generator.state}
        write_npz(file_name, {"__header__": np.array(json.dumps(header))})

    def load_data(self, file_name: str) -> None:
        """Restore the sampling generator from what :meth:`save_data` wrote, for this same dataset."""
        try:
            with np.load(file_name, allow_pickle=False) as npz:
                header = json.loads(str(npz["__header__"]))
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as err:
            raise BufferFileError(f"buffer file {file_name} is damaged or not a dataset sampler's "
                                  f"({first_line(err)[:160]})") from None
        if header.get("format") != SAMPLER_FORMAT:
            raise BufferFileError(f"{file_name} has format {header.get('format')!r}, expected {SAMPLER_FORMAT!r} "
                                  "(a run on a dataset saves only its sampler)")
        if header.get("seal") != self.dataset.seal:
            raise DatasetError(f"{file_name} was saved by a run on dataset {header.get('dataset')} (seal "
                               f"{str(header.get('seal'))[:12]}), not on {self.dataset.path} (seal "
                               f"{self.dataset.seal[:12]})")
        self.rng.bit_generator.state = header["rng"]
