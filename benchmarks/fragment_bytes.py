"""Bytes per transition of the fragments Ray collectors send on Pong: stacks vs each frame once.

A collector on a stacked-frame env (the ``pong-dqn`` preset, 8 envs, eps 1) collects fragments
of ``policy.collect.n_sample`` env steps; each is measured as Ray's pickle (protocol 5) carries
it, with its ``obs`` and ``next_obs`` stacks (what collectors sent before) and packed
(:func:`rlpipe.distributed.fragment.pack_frames`: each distinct frame once, the stacks as int32
indices), with the time to pack on the collector and to rebuild on the learner. The rebuild is
checked to equal the stacks. Needs the ``atari`` extra; no Ray.

    python benchmarks/fragment_bytes.py [--fragments N] [--quick]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import pickle
import time

import numpy as np

from rlpipe.config import load_config
from rlpipe.distributed import CollectorHalf
from rlpipe.distributed.fragment import pack_frames
from rlpipe.recipes.build import build_parts

ENVS = 8


def measure(n_sample: int, fragments: int) -> dict[str, float]:
    """Mean bytes per transition of ``fragments`` fragments of ``n_sample`` env steps, both ways,
    and the mean pack and rebuild times per fragment (us)."""
    overrides = [f"env.collector_env_num={ENVS}", f"policy.collect.n_sample={n_sample}", "policy.random_collect_size=0",
                 "policy.other.replay_buffer.replay_buffer_size=1000", "policy.other.replay_buffer.frame_store=false",
                 "run.torch_threads=1"]
    with build_parts(load_config("pong-dqn", overrides)) as parts:
        half = CollectorHalf(parts.cfg, index=0)  # frame_store=false: it sends stacks
    plain_bytes = packed_bytes = rows = 0
    pack_s = unpack_s = 0.0
    try:
        half.collect(0)  # the first fragment holds back the newest vector step
        for _ in range(fragments):
            plain = half.collect(0)
            start = time.perf_counter()
            transitions, frames = pack_frames(plain.transitions)
            pack_s += time.perf_counter() - start
            packed = dataclasses.replace(plain, transitions=transitions, frames=frames)
            start = time.perf_counter()
            rebuilt = packed.stacked_transitions()
            unpack_s += time.perf_counter() - start
            assert all(np.array_equal(rebuilt[key], plain.transitions[key]) for key in plain.transitions)
            plain_bytes += len(pickle.dumps(plain, protocol=5))
            packed_bytes += len(pickle.dumps(packed, protocol=5))
            rows += len(plain.transitions["reward"])
    finally:
        half.close()
    return {"stacks_bytes_per_transition": round(plain_bytes / rows), "frames_bytes_per_transition":
            round(packed_bytes / rows), "ratio": round(plain_bytes / packed_bytes, 2),
            "pack_us": round(1e6 * pack_s / fragments), "rebuild_us": round(1e6 * unpack_s / fragments)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fragments", type=int, default=20, help="fragments measured per fragment size")
    parser.add_argument("--quick", action="store_true", help="a tiny run (smoke test)")
    args = parser.parse_args()
    fragments = 2 if args.quick else args.fragments
    figures = {}
    for n_sample in (8, 96):  # the preset's fragment (one vector step of 8 envs), and rlpipe's default
        figures[n_sample] = measure(n_sample, fragments)
        f = figures[n_sample]
        print(f"n_sample {n_sample}: {f['stacks_bytes_per_transition']:,} bytes per transition as stacks, "
              f"{f['frames_bytes_per_transition']:,} as frames ({f['ratio']}x fewer); pack {f['pack_us']} us, "
              f"rebuild {f['rebuild_us']} us per fragment")
    print(json.dumps({f"n_sample_{n}": f for n, f in figures.items()}))


if __name__ == "__main__":
    main()
