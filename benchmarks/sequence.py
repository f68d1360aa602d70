"""Sequence replay (R2D2): sampling SequenceBuffer's sequences vs a bare numpy gather of the same bytes.

Data: POPGym-shaped steps of 16 envs stepped together (obs and next_obs float32 [8], action int64,
reward float32, terminated/truncated bool, env_id int64, core_state float32 [128]); episodes end with
probability 1/200 per step (200 steps on average). ``--steps`` of them fill a SequenceBuffer of that
size (sequences of ``--sequence-len`` steps, stride half of it, uniform sampling).

Measured in this process:

- ``gather``: ``sample_batch(32)`` against the floor, plain numpy arrays of the same columns indexed
  as ``col[starts[:, None] + arange(T)]`` at precomputed random start rows (and ``core_state`` at the
  start rows only, as the buffer returns it): the same bytes, with no draw, no sequence table, no
  episode bounds and no mask. ``gather_ratio`` = floor time / SequenceBuffer time (1.0: no overhead;
  the goal is >= 0.5). ``take_ratio`` does the same against ``col.take(rows, axis=0)``, a stricter
  floor (numpy's ``take`` gathers faster than fancy indexing, and the buffer uses it). They
  alternate in rounds; the best round of each is kept (slower rounds measure other load).
- ``push16_us``: one ``push_batch`` of a vector step (16 rows) into the full buffer (no baseline).

Each measurement is one function returning its figures; ``main`` joins them into the JSON line (a
later figure, e.g. an R2D2 update against a hand-written GRU loop, is one more such function).

Usage: ``python benchmarks/sequence.py [--quick]``. The last line printed is JSON.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from rlpipe.data.buffer import SequenceBuffer

ENVS = 16
OBS, CORE = 8, 128
BATCH = 32


def vector_steps(rows: int, seed: int = 0, chunk: int = 1 << 16) -> Iterator[dict[str, np.ndarray]]:
    """``rows`` POPGym-shaped steps of ``ENVS`` envs, in chunks of whole vector steps."""
    rng = np.random.default_rng(seed)
    for start in range(0, rows, chunk):
        n = min(chunk, rows - start)
        ended = rng.random(n) < 1 / 200
        cut = ended & (rng.random(n) < 0.2)
        yield {
            "obs": rng.standard_normal((n, OBS), dtype=np.float32),
            "action": rng.integers(0, 4, n),
            "reward": rng.random(n, dtype=np.float32),
            "next_obs": rng.standard_normal((n, OBS), dtype=np.float32),
            "terminated": ended & ~cut,
            "truncated": cut,
            "env_id": (start + np.arange(n)) % ENVS,
            "core_state": rng.standard_normal((n, CORE), dtype=np.float32),
        }


def best_per_call(fns: dict[str, Callable[[], Any]], calls: int, rounds: int) -> dict[str, float]:
    """Best (over ``rounds`` alternating rounds) mean seconds per call of each of ``fns``."""
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            best[name] = min(best[name], (time.perf_counter() - start) / calls)
    return best


def measure_gather(steps: int, sequence_len: int, calls: int, rounds: int) -> dict[str, Any]:
    """``sample_batch(32)`` of a full SequenceBuffer against numpy's gather of the same bytes."""
    buf = SequenceBuffer(steps, sequence_len, seed=0)
    floor: dict[str, list[np.ndarray]] = {}
    fill_start = time.perf_counter()
    for chunk in vector_steps(steps):
        buf.push_batch(chunk)
        for key, value in chunk.items():
            floor.setdefault(key, []).append(value)
    fill_s = time.perf_counter() - fill_start
    columns = {key: np.concatenate(parts) for key, parts in floor.items()}
    del floor
    core = columns.pop("core_state")
    starts = np.random.default_rng(1).integers(0, steps - sequence_len, (calls, BATCH))
    t = np.arange(sequence_len)
    call = iter(range(1 << 62))

    def numpy_gather() -> dict[str, np.ndarray]:
        first = starts[next(call) % calls]
        rows = first[:, None] + t
        out = {key: col[rows] for key, col in columns.items()}
        out["core_state"] = core[first]
        return out

    def numpy_take() -> dict[str, np.ndarray]:  # the same with ``take``, numpy's faster gather
        first = starts[next(call) % calls]
        rows = first[:, None] + t
        out = {key: col.take(rows, axis=0) for key, col in columns.items()}
        out["core_state"] = core.take(first, axis=0)
        return out

    def rlpipe_sample() -> Any:
        return buf.sample_batch(BATCH, unroll_len=sequence_len)

    for fn in (numpy_gather, numpy_take, rlpipe_sample):  # first calls (caches, allocator) out of the timing
        fn()
    best = best_per_call({"numpy": numpy_gather, "take": numpy_take, "rlpipe": rlpipe_sample}, calls, rounds)
    sequences = buf.count_runs(sequence_len)
    vector = next(vector_steps(ENVS, seed=2))
    push = best_per_call({"push": lambda: buf.push_batch(vector)}, calls, rounds)["push"]
    print(f"filled {steps:,} steps in {fill_s:.1f} s: {sequences:,} sequences of {sequence_len}")
    print(f"numpy gather (floor):   {best['numpy'] * 1e6:8.1f} us per batch of {BATCH}")
    print(f"numpy take:             {best['take'] * 1e6:8.1f} us per batch of {BATCH}")
    print(f"SequenceBuffer sample:  {best['rlpipe'] * 1e6:8.1f} us per batch of {BATCH}")
    print(f"gather_ratio:           {best['numpy'] / best['rlpipe']:8.3f} (goal >= 0.5)")
    print(f"take_ratio:             {best['take'] / best['rlpipe']:8.3f}")
    print(f"push of one vector step ({ENVS} rows): {push * 1e6:.1f} us")
    return {
        "sequences": sequences,
        "numpy_gather_us": round(best["numpy"] * 1e6, 2),
        "rlpipe_sample_us": round(best["rlpipe"] * 1e6, 2),
        "numpy_take_us": round(best["take"] * 1e6, 2),
        "gather_ratio": round(best["numpy"] / best["rlpipe"], 3),
        "take_ratio": round(best["take"] / best["rlpipe"], 3),
        "push16_us": round(push * 1e6, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny run (seconds)")
    parser.add_argument("--steps", type=int, default=1_000_000, help="steps pushed (the buffer's size)")
    parser.add_argument("--sequence-len", type=int, default=50, help="steps per sequence")
    parser.add_argument("--calls", type=int, default=500, help="sample calls per round")
    parser.add_argument("--rounds", type=int, default=7, help="alternating rounds (the best is kept)")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.calls, args.rounds = 20_000, 50, 3
    figures: dict[str, Any] = {"steps": args.steps, "sequence_len": args.sequence_len, "batch": BATCH}
    figures |= measure_gather(args.steps, args.sequence_len, args.calls, args.rounds)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
