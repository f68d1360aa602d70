"""``scripts/setup.sh``, dry-run (``RLPIPE_SETUP_DRY_RUN=1`` prints its commands): the CPU build of
PyTorch from PyTorch's CPU index by default (as on a machine without a local wheel), a CUDA build
from PyTorch's index with the word ``cuda``. Nothing is installed."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "setup.sh"
CPU_TORCH = "torch==2.13.0+cpu --extra-index-url https://download.pytorch.org/whl/cpu"


def dry_run(argument: str, **env: str) -> list[str]:
    """The pip commands ``scripts/setup.sh ARGUMENT`` would run."""
    done = subprocess.run(["bash", str(SCRIPT), argument], env={**os.environ, "RLPIPE_SETUP_DRY_RUN": "1", **env},
                          capture_output=True, text=True, check=True)
    return [line.removeprefix("+ .venv/bin/python -m pip install --quiet ") for line in done.stdout.splitlines()
            if line.startswith("+ .venv/bin/python -m pip install")]


@pytest.mark.parametrize(("argument", "env", "torch", "rlpipe"), [
    ("", {}, CPU_TORCH, "-e ."),
    ("mujoco,plot", {}, CPU_TORCH, "-e .[mujoco,plot]"),
    ("cuda", {}, "torch==2.13.0+cu128 --index-url https://download.pytorch.org/whl/cu128", "-e ."),
    ("test,cuda", {"RLPIPE_CUDA": "cu126"}, "torch==2.13.0+cu126 --index-url https://download.pytorch.org/whl/cu126",
     "-e .[test]"),
])
def test_the_torch_build_and_the_extras(argument, env, torch, rlpipe):
    assert dry_run(argument, **env) == ["--upgrade pip", torch, rlpipe]

