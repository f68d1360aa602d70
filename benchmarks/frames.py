"""Frame store memory and speed on Atari-shaped transitions (``uint8 [4, 84, 84]`` stacks).

Data: 8 envs stepped together, one ``push_batch`` of 8 rows per vector step (what the
collector and ``data_pusher`` hand the buffer, with their ``env_id`` and meta). Each env step
shows one new 84x84 frame; stacks are padded with the reset frame at an episode's start (as
gymnasium's ``FrameStackObservation``); episodes last ``--episode-steps`` steps on average
(uniform in [0.5x, 1.5x]), and an episode's last ``next_obs`` is its final observation. With
``--nstep`` > 1 the rows go through the n-step accumulator first.

Measured in this process:

- ``bytes_per_transition``: growth of resident memory (RSS, ``/proc/self/statm``) from before
  the buffer is made to when it is full and its frame ring has been written all the way round
  (every slot touched), over the buffer's size: everything the store holds (frames, slot
  columns, the other fields and meta, content lookups), allocated and filled;
- ``push_us_per_transition``: time in ``push_batch`` per transition (hashing, matching and
  writing frames, the buffer's own push);
- ``sample32_us``: median time of ``sample_batch(32)`` (obs and next_obs stacks rebuilt) on
  the full buffer, and ``sample32_floor_us``: bare numpy indexing of as many frames (the copy alone).

Usage: ``python benchmarks/frames.py [--transitions N] [--quick]``. The last line printed is JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Iterator

import numpy as np

from rlpipe.data import DequeBuffer, FrameStore, NStepAccumulator

ENVS = 8
STACK = 4
FRAME = (84, 84)
FRAME_BYTES = FRAME[0] * FRAME[1]


def rss_bytes() -> int:
    """Resident memory of this process."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def atari_steps(episode_steps: int, seed: int = 0) -> Iterator[dict[str, np.ndarray]]:
    """Vector steps of ``ENVS`` envs, forever: one new frame per env and step."""
    rng = np.random.default_rng(seed)
    pool = rng.integers(0, 256, (256, *FRAME), dtype=np.uint8)
    counter = 0

    def new_frames(n: int) -> np.ndarray:  # distinct frames: a pool frame stamped with a counter
        nonlocal counter
        frames = pool[rng.integers(0, len(pool), n)]
        frames[:, 0, :8] = np.arange(counter, counter + n, dtype=np.int64).view(np.uint8).reshape(n, 8)
        counter += n
        return frames

    def length() -> int:
        return int(rng.integers(episode_steps // 2, episode_steps * 3 // 2 + 1))

    stacks = np.repeat(new_frames(ENVS)[:, None], STACK, axis=1)
    left = np.array([length() for _ in range(ENVS)])
    env_id = np.arange(ENVS)
    while True:
        left -= 1
        ended = left == 0
        next_obs = np.concatenate([stacks[:, 1:], new_frames(ENVS)[:, None]], axis=1)
        truncated = ended & (rng.random(ENVS) < 0.1)
        yield {
            "obs": stacks,
            "action": rng.integers(0, 6, ENVS),
            "reward": np.zeros(ENVS, dtype=np.float32),
            "next_obs": next_obs,
            "terminated": ended & ~truncated,
            "truncated": truncated,
            "env_id": env_id,
        }
        stacks = next_obs.copy()
        for i in np.flatnonzero(ended):
            stacks[i] = new_frames(1)[0]
            left[i] = length()


def fill(size: int, episode_steps: int, nstep: int, sample_calls: int) -> dict[str, float]:
    """Fill a frame-store buffer of ``size``; its memory and push time."""
    steps = atari_steps(episode_steps)
    accumulator = NStepAccumulator(nstep, 0.99) if nstep > 1 else None
    before = rss_bytes()
    buffer = DequeBuffer(size, seed=0)
    store = FrameStore(buffer)
    buffer.use(store)
    pushed, push_s = 0, 0.0
    while buffer.count() < size or store.ring.next_id < store.ring.capacity:
        rows = next(steps)
        if accumulator is not None:
            rows = accumulator.add(rows)
        n = len(rows["reward"])
        meta = {"train_iter_data_collected": np.full(n, pushed // 64, dtype=np.int64)}
        start = time.perf_counter()
        buffer.push_batch(rows, meta)
        push_s += time.perf_counter() - start
        pushed += n
    grown = rss_bytes() - before
    sample_us, floor_us = time_sampling(buffer, store, sample_calls)
    return {
        "transitions": size,
        "pushed": pushed,
        "frame_bytes": FRAME_BYTES,
        "frame_capacity": store.ring.capacity,
        "frames_written": store.ring.next_id,
        "evicted": store.evicted,
        "bytes_per_transition": round(grown / size, 1),
        "ratio_to_frame": round(grown / size / FRAME_BYTES, 4),
        "push_us_per_transition": round(push_s / pushed * 1e6, 2),
        "sample32_us": round(sample_us, 1),
        "sample32_floor_us": round(floor_us, 1),
    }


def time_sampling(buffer: DequeBuffer, store: FrameStore, calls: int) -> tuple[float, float]:
    """Median microseconds of ``sample_batch(32)``, and of bare indexing of as many frames."""
    rng = np.random.default_rng(1)
    frames = store.ring.frames
    assert frames is not None
    times, floors = [], []
    for _ in range(calls):
        start = time.perf_counter()
        buffer.sample_batch(32)
        times.append(time.perf_counter() - start)
        slots = rng.integers(0, len(frames), (2, 32, STACK))
        start = time.perf_counter()
        frames[slots]
        floors.append(time.perf_counter() - start)
    return float(np.median(times) * 1e6), float(np.median(floors) * 1e6)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--transitions", type=int, default=1_000_000, help="buffer size")
    parser.add_argument("--episode-steps", type=int, default=400, help="mean episode length")
    parser.add_argument("--nstep", type=int, default=1, help="n-step return of the rows")
    parser.add_argument("--sample-calls", type=int, default=2000, help="sample_batch(32) calls timed")
    parser.add_argument("--quick", action="store_true", help="a tiny run (smoke test)")
    args = parser.parse_args()
    if args.quick:
        args.transitions, args.sample_calls = 5_000, 20
    figures = fill(args.transitions, args.episode_steps, args.nstep, max(args.sample_calls, 1))
    print(f"{figures['transitions']:,} transitions of 4x84x84 uint8 stacks ({args.episode_steps}-step episodes, "
          f"n-step {args.nstep}): {figures['bytes_per_transition']:,.0f} bytes each "
          f"({figures['ratio_to_frame']:.3f}x one frame); push {figures['push_us_per_transition']:.1f} us "
          f"per transition; sample_batch(32) {figures['sample32_us']:.0f} us "
          f"(bare copy {figures['sample32_floor_us']:.0f} us)")
    print(json.dumps({**figures, "episode_steps": args.episode_steps, "nstep": args.nstep}))


if __name__ == "__main__":
    main()
