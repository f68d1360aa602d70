"""FrameStore memory, measured as the process's resident memory by ``benchmarks/frames.py``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def test_a_full_store_keeps_about_one_frame_per_transition(layout: str) -> None:
    """50,000 Atari transitions (4x84x84 stacks), the buffer full and its frame ring written
    round: about one 7,056-byte frame each (the default ring holds 2% + 2,048 frames more than
    the buffer, which weighs 6% at this size, much less at 1M)."""
    if layout == "records":
        pytest.skip("the subprocess uses the default layout; one run is enough")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "frames.py"), "--transitions", "50000", "--sample-calls", "20"],
        capture_output=True, text=True, env=env, timeout=300, check=True,
    )
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    assert figures["evicted"] == 0 and figures["frames_written"] >= figures["frame_capacity"]
    assert 7056 <= figures["bytes_per_transition"] <= 1.15 * 7056, figures
