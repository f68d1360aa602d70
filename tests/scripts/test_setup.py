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



FAKE_PYTHON = """#!/usr/bin/env bash
echo "$*" >> "$(dirname "$0")/../calls"
"""
"""Stands in for .venv/bin/python: records each pip call and succeeds (so nothing is installed)."""


def setup_calls(repo: Path, extras: str) -> list[str]:
    """The pip calls a real (not dry) ``setup.sh EXTRAS`` makes in ``repo``, whose .venv holds the fake python."""
    calls = repo / ".venv" / "calls"
    calls.unlink(missing_ok=True)
    subprocess.run(["bash", str(repo / "scripts" / "setup.sh"), extras], cwd=repo, check=True, capture_output=True)
    return calls.read_text().splitlines() if calls.is_file() else []


def test_extras_only_grow_so_train_after_test_installs_nothing(tmp_path):
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "setup.sh").write_text(SCRIPT.read_text())
    (tmp_path / "pyproject.toml").write_text((SCRIPT.parents[1] / "pyproject.toml").read_text())
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    test_sh, train_sh = "test,dev,plot", "plot"  # what scripts/test.sh and scripts/train.sh ask for
    assert "test,dev,plot" in (SCRIPT.parent / "test.sh").read_text()
    assert 'scripts/setup.sh plot' in (SCRIPT.parent / "train.sh").read_text()
    first = setup_calls(tmp_path, test_sh)
    assert first[-1] == "-m pip install --quiet -e .[dev,plot,test]"
    assert setup_calls(tmp_path, train_sh) == [] and setup_calls(tmp_path, test_sh) == []
    grown = setup_calls(tmp_path, "mujoco")  # a new extra: installed with every earlier one
    assert grown[-1] == "-m pip install --quiet -e .[dev,mujoco,plot,test]"
    assert setup_calls(tmp_path, "") == []
    (tmp_path / "pyproject.toml").write_text((tmp_path / "pyproject.toml").read_text() + "\n# changed\n")
    assert setup_calls(tmp_path, "")[-1] == "-m pip install --quiet -e .[dev,mujoco,plot,test]"
