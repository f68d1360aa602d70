"""The peer libraries the benchmarks compare with (the ``bench`` extra), and what a benchmark does without one.

Not a benchmark: the scripts in this folder import it. Without a peer a script still measures its
rlpipe side, prints one line saying that the peer's side was skipped (:func:`peer_installed`), and
writes ``null`` for the peer's figures and ratios, under the same keys as when it is installed.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from pathlib import Path

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


def peer_version(module: str) -> str:
    """The installed version of peer library ``module``'s package, for the results its runs write (the code
    that ran), or ``"not installed"``."""
    try:
        return importlib.metadata.version(DISTRIBUTIONS[module])
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


D3RLPY_PYTHON = "/work/d3venv/bin/python"
"""Where the benchmarks look for d3rlpy's interpreter by default: d3rlpy 2.8.1 pins gymnasium 1.0.0, so it
lives in a virtualenv of its own, never in rlpipe's."""
D3RLPY_VENV = ("python -m venv D && D/bin/pip install torch==2.13.0 && D/bin/pip install d3rlpy==2.8.1 "
               "'mujoco>=3.2,<3.11' imageio")
"""How to make that virtualenv (MuJoCo at rlpipe's versions, so both sides step the same physics)."""


def d3rlpy_python(python: str) -> str | None:
    """``python`` if it is an interpreter to run d3rlpy's side with, else None (one printed line says why:
    ``--d3rlpy-python none``, or no such file and how to make one)."""
    if python.lower() == "none":
        print("d3rlpy side skipped: --d3rlpy-python none")
        return None
    if not Path(python).is_file():
        print(f"d3rlpy side skipped: {python} does not exist; make d3rlpy's own virtualenv D with "
              f"`{D3RLPY_VENV}` and pass --d3rlpy-python D/bin/python")
        return None
    return python
