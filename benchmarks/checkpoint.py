"""The cost of sealed checkpoints: ``save_checkpoint``/``load_checkpoint`` against bare
``torch.save``/``torch.load`` of the same state, and hashing the replay-buffer file.

The state is the policy a SAC checkpoint of ``halfcheetah-sac`` holds (actor, twin critics,
target critics, both Adams: 1.5 MB). The sealed path adds the SHA-256 over
the payload (and the header) on save and its check on load; the buffer row times
``file_sha256`` of a 100,000-transition buffer file (18 MB), against writing that file. Rounds
alternate and the best of each is kept. ``save_ratio = bare / sealed`` save time and
``load_ratio`` the same for loading (1.0: no cost).

    python benchmarks/checkpoint.py [--rounds N] [--quick]
"""
from __future__ import annotations

import argparse
import io
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from rlpipe.config import load_config
from rlpipe.data import DequeBuffer
from rlpipe.policy import SACPolicy
from rlpipe.utils.checkpoint import load_checkpoint, save_checkpoint
from rlpipe.utils.integrity import file_sha256


def best_time(fn: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    rounds = 2 if args.quick else args.rounds
    cfg = load_config("halfcheetah-sac", ["policy.model.obs_shape=17", "policy.model.action_shape=6"])
    state = {"policy": SACPolicy(cfg.policy).state_dict(), "counters": {"env_step": 1, "train_iter": 1}}
    with tempfile.TemporaryDirectory() as tmp:
        sealed, bare = Path(tmp) / "sealed.pth.tar", Path(tmp) / "bare.pth.tar"

        def bare_save() -> None:
            buffer = io.BytesIO()
            torch.save(state, buffer)
            bare.write_bytes(buffer.getvalue())

        times = {
            "bare_save": best_time(bare_save, rounds),
            "sealed_save": best_time(lambda: save_checkpoint(state, sealed, run_id="bench"), rounds),
            "bare_load": best_time(lambda: torch.load(bare, weights_only=True), rounds),
            "sealed_load": best_time(lambda: load_checkpoint(sealed), rounds),
        }
        replay = DequeBuffer(size=100_000)
        rows = 2_000 if args.quick else 100_000
        replay.push_batch({"obs": np.zeros((rows, 17), np.float32), "next_obs": np.zeros((rows, 17), np.float32),
                           "action": np.zeros((rows, 6), np.float32), "reward": np.zeros(rows, np.float32)})
        buffer_file = Path(tmp) / "x.buffer.npz"
        times["buffer_save"] = best_time(lambda: replay.save_data(str(buffer_file)), max(1, rounds // 3))
        times["buffer_hash"] = best_time(lambda: file_sha256(buffer_file), max(1, rounds // 3))
        size_mb = sealed.stat().st_size / 1e6
        buffer_mb = buffer_file.stat().st_size / 1e6
    for name, seconds in times.items():
        print(f"{name:12s} {seconds * 1e3:8.1f} ms")
    save_ratio = times["bare_save"] / times["sealed_save"]
    load_ratio = times["bare_load"] / times["sealed_load"]
    buffer_ratio = times["buffer_save"] / (times["buffer_save"] + times["buffer_hash"])
    print(f"checkpoint {size_mb:.1f} MB: save bare/sealed {save_ratio:.2f}, load bare/sealed {load_ratio:.2f}; "
          f"buffer {buffer_mb:.0f} MB: save / (save + hash) {buffer_ratio:.2f}")
    print(json.dumps({
        **{f"{name}_ms": round(seconds * 1e3, 2) for name, seconds in times.items()},
        "save_ratio": round(save_ratio, 3), "load_ratio": round(load_ratio, 3),
        "buffer_save_ratio": round(buffer_ratio, 3),
    }))


if __name__ == "__main__":
    main()
