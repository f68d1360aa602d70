"""The peer libraries the benchmarks compare with (the ``bench`` extra), and what a benchmark does without one.

Not a benchmark: the scripts in this folder import it. Without a peer a script still measures its
rlpipe side, prints one line saying that the peer's side was skipped (:func:`peer_installed`), and
writes ``null`` for the peer's figures and ratios, under the same keys as when it is installed.
"""

from __future__ import annotations

import importlib

DISTRIBUTIONS = {"stable_baselines3": "stable-baselines3", "tianshou": "tianshou"}
"""Peer module -> the package that installs it."""


def peer_installed(module: str) -> bool:
    """Whether peer library ``module`` imports; if it is not installed, one printed line says its side is
    skipped. A peer that is installed but fails to import raises."""
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as err:
        if err.name != module:
            raise
        print(f"{DISTRIBUTIONS[module]} side skipped: {module} is not installed (pip install 'rlpipe[bench]')")
        return False
    return True
