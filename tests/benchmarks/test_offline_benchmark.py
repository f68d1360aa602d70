"""``benchmarks/offline.py`` runs on a tiny budget (``--quick``) without d3rlpy and ends with its JSON line.

d3rlpy lives in a virtualenv of its own (it pins gymnasium 1.0.0), so the test passes
``--d3rlpy-python none``: d3rlpy's side is skipped (one line says so) and its figures and ratios are
null; rlpipe's updates and both dataset loads still run, and the load ratio must be a positive
finite number. With ``--d3rlpy-python`` pointing at an interpreter that does not exist, the script
says how to make one and still exits 0.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "offline.py"
TIMEOUT_S = 300
KEYS = {
    "rlpipe_td3bc_updates_per_s", "d3rlpy_td3bc_updates_per_s", "rlpipe_iql_updates_per_s", "d3rlpy_iql_updates_per_s",
    "transitions", "rlpipe_load_s", "npz_load_s", "rlpipe_load_rss_mib", "npz_load_rss_mib", "rlpipe_load_anon_mib",
    "npz_load_anon_mib", "rlpipe_first_load_s",
    "npz_first_load_s", "rlpipe_first_load_rss_mib", "npz_first_load_rss_mib",
    "td3bc_d3rlpy_ratio", "iql_d3rlpy_ratio", "load_npz_ratio",
}
D3RLPY_FIGURES = ("d3rlpy_td3bc_updates_per_s", "d3rlpy_iql_updates_per_s", "td3bc_d3rlpy_ratio", "iql_d3rlpy_ratio")


def quick_run(*args: str) -> str:
    """Stdout of ``benchmarks/offline.py --quick [args]``, which must exit with status 0."""
    try:
        run = subprocess.run([sys.executable, str(SCRIPT), "--quick", *args], cwd=ROOT, capture_output=True,
                             text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as err:
        pytest.fail(f"benchmarks/offline.py --quick ran past {TIMEOUT_S} s; its output:\n{err.stdout}\n{err.stderr}")
    assert run.returncode == 0, f"benchmarks/offline.py --quick exited with {run.returncode}:\n{run.stderr[-3000:]}"
    return run.stdout


def test_quick_run_without_d3rlpy_ends_with_its_figures() -> None:
    out = quick_run("--d3rlpy-python", "none")
    lines = out.strip().splitlines()
    assert "d3rlpy side skipped: --d3rlpy-python none" in lines
    figures = json.loads(lines[-1])
    assert set(figures) == KEYS
    for key in D3RLPY_FIGURES:
        assert figures[key] is None, f"{key}: {figures[key]} without d3rlpy"
    for key in ("rlpipe_td3bc_updates_per_s", "rlpipe_iql_updates_per_s", "rlpipe_load_s", "npz_load_s",
                "load_npz_ratio"):
        value = figures[key]
        assert isinstance(value, int | float) and math.isfinite(value) and value > 0, f"{key}: {value}"
    assert figures["transitions"] == 10_000


def test_a_missing_d3rlpy_interpreter_is_one_line_saying_how_to_make_it(tmp_path: Path) -> None:
    missing = tmp_path / "no-venv" / "bin" / "python"
    out = quick_run("--d3rlpy-python", str(missing), "--rounds", "1")
    skip = [line for line in out.splitlines() if line.startswith("d3rlpy side skipped:")]
    assert len(skip) == 1 and str(missing) in skip[0] and "pip install d3rlpy==2.8.1" in skip[0]
    figures = json.loads(out.strip().splitlines()[-1])
    assert all(figures[key] is None for key in D3RLPY_FIGURES)
