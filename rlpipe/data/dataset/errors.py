"""The one error of datasets, apart so that every dataset module can raise it without an import cycle."""
from __future__ import annotations

from rlpipe.errors import RlpipeError


class DatasetError(RlpipeError, ValueError):
    """A dataset that cannot be written or used: missing, damaged, tampered with, empty, too large, or
    not for this env."""
