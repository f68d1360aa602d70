"""Transitions/s delivered into the learner's buffer by 2 Ray collector actors, against Ray's own floor.

The datapath alone: each collector actor hands over a ready-made fragment of CartPole
transitions (a trivial policy and no env to step), through the same ``RayCollectors``,
``fragment_receiver`` and ``data_pusher`` as ``rlpipe train --backend ray``, into a
``DequeBuffer``; a stand-in learner counts one train iteration per fragment (so staleness means
something) without computing. The floor, measured in the same run: a ``ray.put`` then
``ray.get`` round trip of the same fragment in one process, as fast as Ray moves those bytes.

    python benchmarks/distributed.py [--fragments N] [--rows R] [--quick]
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from rlpipe.config import load_config
from rlpipe.config.schema import DistributedConfig
from rlpipe.data import DequeBuffer
from rlpipe.distributed import Fragment, RayCollectors, fragment_receiver, ray_session
from rlpipe.framework import OnlineRLContext, Task
from rlpipe.framework.middleware import data_pusher
from rlpipe.recipes.build import make_policy

COLLECTORS = 2


def cartpole_fragment(rows: int, version: int = 0) -> Fragment:
    """A fragment of ``rows`` CartPole-shaped transitions (float32 observations of 4)."""
    rng = np.random.default_rng(0)
    transitions = {
        "obs": rng.standard_normal((rows, 4), dtype=np.float32),
        "next_obs": rng.standard_normal((rows, 4), dtype=np.float32),
        "action": rng.integers(2, size=rows),
        "reward": np.ones(rows, dtype=np.float32),
        "terminated": np.zeros(rows, dtype=bool),
        "truncated": np.zeros(rows, dtype=bool),
        "env_id": np.arange(rows) % 8,
    }
    return Fragment(collector=0, sequence=0, policy_version=version, env_steps=rows, env_episodes=0,
                    transitions=transitions, episode_stats={}, eps=None)


class ReadyFragmentActor:
    """A collector actor with a trivial policy: the same fragment every time, stamped as sent."""

    def __init__(self, config: Mapping[str, Any], index: int) -> None:
        self._index = index
        self._fragment = cartpole_fragment(int(config["policy"]["collect"]["n_sample"]))
        self._version = 0
        self._sequence = 0

    def collect(self, learner_env_step: int, version: int, weights: Mapping[str, Any] | None) -> Fragment:
        if weights is not None:
            self._version = version
        self._sequence += 1
        return Fragment(self._index, self._sequence, self._version, self._fragment.env_steps, 0,
                        self._fragment.transitions, {}, None)


def delivered(ray: Any, rows: int, fragments: int) -> tuple[float, float, float]:
    """Transitions/s and fragments/s into the buffer from :data:`COLLECTORS` actors, and the median staleness."""
    cfg = load_config("cartpole-dqn", [
        f"distributed.collectors={COLLECTORS}", f"policy.collect.n_sample={rows}", "env.collector_env_num=1",
        "policy.model.obs_shape=4", "policy.model.action_shape=2",
        f"policy.other.replay_buffer.replay_buffer_size={rows * fragments}",
    ])
    collectors = RayCollectors(ray, cfg, make_policy(cfg), body=ReadyFragmentActor)
    buffer = DequeBuffer(size=rows * fragments)
    staleness: list[float] = []

    def stand_in_learner(ctx: OnlineRLContext) -> None:
        ctx.train_iter += 1
        staleness.append(ctx.distributed_stats["staleness_median"])

    task = Task()
    try:
        with task.start(ctx=OnlineRLContext()):
            task.use(fragment_receiver(collectors)).use(data_pusher(cfg, buffer)).use(stand_in_learner)
            task.run(max_step=20)  # warm-up: actors started, weights sent
            first = buffer.count()
            start = time.perf_counter()
            task.run(max_step=fragments)
            elapsed = time.perf_counter() - start
    finally:
        collectors.close()
    return (buffer.count() - first) / elapsed, fragments / elapsed, statistics.median(staleness)


def floor(ray: Any, rows: int, fragments: int) -> float:
    """Transitions/s of a ``ray.put`` + ``ray.get`` round trip of the same fragment in one process."""
    fragment = cartpole_fragment(rows)
    for _ in range(20):
        ray.get(ray.put(fragment))
    start = time.perf_counter()
    for _ in range(fragments):
        ray.get(ray.put(fragment))
    return rows * fragments / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fragments", type=int, default=3000, help="fragments per measurement")
    parser.add_argument("--rows", type=int, default=96, help="transitions per fragment (cartpole-dqn's n_sample)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="a tiny run (smoke test)")
    args = parser.parse_args()
    fragments, repeats = (200, 1) if args.quick else (args.fragments, args.repeats)
    with ray_session(DistributedConfig(object_store_mb=256), COLLECTORS) as ray:
        # interleave the two so that machine noise hits both alike; keep the best of each
        ours, bare, per_s, stale = 0.0, 0.0, 0.0, 0.0
        for _ in range(repeats):
            bare = max(bare, floor(ray, args.rows, fragments))
            rate, fragments_per_s, staleness = delivered(ray, args.rows, fragments)
            if rate > ours:
                ours, per_s, stale = rate, fragments_per_s, staleness
    ratio = ours / bare
    print(f"ray.put + ray.get of the fragment : {bare:10.0f} transitions/s")
    print(f"2 collector actors -> buffer      : {ours:10.0f} transitions/s ({per_s:.0f} fragments/s of "
          f"{args.rows}; {ratio:.2f}x the floor, goal >= 0.8); median staleness {stale:.0f} fragments")
    print(json.dumps({"floor_transitions_per_s": round(bare), "delivered_transitions_per_s": round(ours),
                      "fragments_per_s": round(per_s, 1), "staleness_median": stale,
                      "datapath_ratio": round(ratio, 3)}))


if __name__ == "__main__":
    main()
