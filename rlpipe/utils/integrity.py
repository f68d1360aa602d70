"""Digests that let a file be checked before it is used: SHA-256, or HMAC-SHA256 when
``RLPIPE_CHECKPOINT_KEY`` is set (then only someone holding the key can write a file that
passes, which guards against tampering, not only against damage)."""
from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Iterable
from pathlib import Path

KEY_ENV = "RLPIPE_CHECKPOINT_KEY"
PLAIN, KEYED = "sha256", "hmac-sha256"

__all__ = ["KEYED", "KEY_ENV", "PLAIN", "algorithm_in_use", "digest", "file_sha256"]


def _key() -> bytes | None:
    key = os.environ.get(KEY_ENV)
    return key.encode() if key else None


def algorithm_in_use() -> str:
    """:data:`KEYED` when ``RLPIPE_CHECKPOINT_KEY`` is set, else :data:`PLAIN`."""
    return KEYED if _key() is not None else PLAIN


def digest(chunks: Iterable[bytes], algorithm: str) -> str:
    """Hex digest of the concatenated ``chunks`` with ``algorithm`` (the key is read from the
    environment for :data:`KEYED`; without it, ``ValueError``)."""
    mac: hmac.HMAC | hashlib._Hash
    if algorithm == KEYED:
        key = _key()
        if key is None:
            raise ValueError(f"it is signed (HMAC) and {KEY_ENV} is not set")
        mac = hmac.new(key, digestmod=hashlib.sha256)
    elif algorithm == PLAIN:
        mac = hashlib.sha256()
    else:
        raise ValueError(f"unknown digest algorithm {algorithm!r}")
    for chunk in chunks:
        mac.update(chunk)
    return mac.hexdigest()


def file_sha256(path: str | Path) -> str:
    """SHA-256 of a file's bytes, read in 1 MiB blocks."""
    sha = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            sha.update(block)
    return sha.hexdigest()
