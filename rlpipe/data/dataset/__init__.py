"""Datasets: transitions at rest (sealed files with a manifest), the buffer that samples them, and Minari's format."""

from rlpipe.data.dataset.buffer import DatasetBuffer
from rlpipe.data.dataset.episodes import Episodes, find_episodes
from rlpipe.data.dataset.format import COLUMNS, Dataset, DatasetError, write_dataset

__all__ = ["COLUMNS", "Dataset", "DatasetBuffer", "DatasetError", "Episodes", "find_episodes", "write_dataset"]
