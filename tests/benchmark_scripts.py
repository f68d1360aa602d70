"""Loading a script of ``benchmarks/`` (or ``scripts/``) as a module, for the tests that check what it computes.

benchmarks/ is not a package, and it must never go on ``sys.path`` in a test: its ``minatar.py`` would
shadow the minatar package for every later test in the session (31 failures in a fresh clone once).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def script_module(path: Path, name: str, register: bool = False) -> ModuleType:
    """The script at ``path`` as a module named ``name``, without putting its folder on ``sys.path``;
    with ``register`` also in ``sys.modules``, so that a sibling importing it by name finds this one."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    if register:
        sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def benchmark_module(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` as a module, registered in ``sys.modules`` under ``name`` so that a script
    importing a sibling by name (``import peers``) finds the one loaded here first."""
    return script_module(BENCHMARKS / f"{name}.py", name, register=True)
