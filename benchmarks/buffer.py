"""Replay-buffer throughput and memory: rlpipe's DequeBuffer vs a plain numpy ring and libraries.

Data: CartPole-shaped transitions (obs/next_obs float32[4], action int64, reward float32,
terminated/truncated bool: 46 raw bytes). Measured, each in this process:

- push one transition at a time, and in batches of 8 (a vector env step), into a buffer of
  ``--n`` slots (libraries that are slow at this are timed on ``--lib-push-n`` pushes);
- ``--samples`` uniform batches of 256 from a full buffer;
- ``--prio-rounds`` prioritized sample(256) + priority update(256) rounds;
- peak traced memory (tracemalloc) per stored transition while filling a buffer.

Sampling and priority rates are the best of 5 equal parts (the least disturbed by noise);
the priority rounds of rlpipe and Tianshou run interleaved, part by part, so that load on a
shared machine hits both alike. Both priority rounds do the same work: draw 256 items in
proportion to priority^alpha, gather their fields, compute their importance-sampling
weights (returned with the batch), and write 256 new priorities.

Baselines: a plain numpy ring (the floor: no API, no checks), and when importable (the
``bench`` extra) Stable-Baselines3's ``ReplayBuffer`` and Tianshou's ``ReplayBuffer`` /
``VectorReplayBuffer`` / ``PrioritizedReplayBuffer``, each used as its docs show (a library that
is not installed is skipped, one line says so, and its figures are null). Rates are
items per second; sampling ratios compare rlpipe's ``replace=True`` (what the others do),
and ``sample_no_replace_*`` its default ``replace=False``; every ratio is rlpipe's rate
over the other's (> 1: rlpipe is faster), except ``memory_vs_raw_ratio`` (bytes per
transition over raw bytes; lower is better).

Usage: ``python benchmarks/buffer.py [--quick]``. The last line printed is JSON.
"""

from __future__ import annotations

import argparse
import json
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
from peers import peer_installed  # benchmarks/peers.py: this script's folder is on the path

from rlpipe.data import DequeBuffer, PriorityExperienceReplay

BATCH = 256
RAW_BYTES = 4 * 4 * 2 + 8 + 4 + 1 + 1
FIELDS = ("obs", "next_obs", "action", "reward", "terminated", "truncated")


def cartpole(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    obs = rng.standard_normal((n, 4), dtype=np.float32)
    return {
        "obs": obs,
        "next_obs": obs + np.float32(0.01),
        "action": rng.integers(0, 2, n),
        "reward": np.ones(n, dtype=np.float32),
        "terminated": rng.random(n) < 0.01,
        "truncated": np.zeros(n, dtype=bool),
    }


class NumpyRing:
    """The floor: preallocated arrays and an insert pointer, nothing else."""

    def __init__(self, size: int) -> None:
        self.size, self.pos, self.full = size, 0, False
        self.obs = np.zeros((size, 4), np.float32)
        self.next_obs = np.zeros((size, 4), np.float32)
        self.action = np.zeros(size, np.int64)
        self.reward = np.zeros(size, np.float32)
        self.terminated = np.zeros(size, bool)
        self.truncated = np.zeros(size, bool)
        self.rng = np.random.default_rng(0)

    def add(self, obs, next_obs, action, reward, terminated, truncated) -> None:
        i = self.pos
        self.obs[i], self.next_obs[i], self.action[i] = obs, next_obs, action
        self.reward[i], self.terminated[i], self.truncated[i] = reward, terminated, truncated
        self.pos = (i + 1) % self.size
        self.full = self.full or self.pos == 0

    def add_batch(self, batch: dict[str, np.ndarray]) -> None:
        idx = (self.pos + np.arange(len(batch["reward"]))) % self.size
        for key in FIELDS:
            getattr(self, key)[idx] = batch[key]
        self.pos = int(idx[-1] + 1) % self.size
        self.full = self.full or self.pos < len(idx)

    def sample(self, n: int) -> dict[str, np.ndarray]:
        idx = self.rng.integers(0, self.size if self.full else self.pos, n)
        return {key: getattr(self, key)[idx] for key in FIELDS}


def rate(n_items: int, fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return n_items / (time.perf_counter() - start)


def best_rate(n_items: int, fn: Callable[[int], Any], repeats: int = 5) -> float:
    """Best of ``repeats`` runs of ``fn(n_items // repeats)``: the least disturbed by machine noise."""
    part = max(1, n_items // repeats)
    return max(rate(part, lambda: fn(part)) for _ in range(repeats))


def best_rates(n_items: int, fns: dict[str, Callable[[int], Any]], repeats: int = 5) -> dict[str, float]:
    """:func:`best_rate` of each of ``fns``, their parts interleaved (noise hits all alike)."""
    part = max(1, n_items // repeats)
    best = dict.fromkeys(fns, 0.0)
    for _ in range(repeats):
        for name, fn in fns.items():
            best[name] = max(best[name], rate(part, lambda fn=fn: fn(part)))
    return best


def peak_bytes(build: Callable[[], Any], n: int) -> float:
    """Peak traced bytes per stored transition while ``build`` fills a buffer of ``n``."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    keep = build()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    del keep
    return peak / n


# ---- rlpipe and floor -----------------------------------------------------------------------
def bench_rlpipe(d: dict[str, np.ndarray], n: int, samples: int) -> dict[str, float]:
    obs, nobs, act, rew, term, trunc = (d[k] for k in FIELDS)
    out = {}
    buf = DequeBuffer(n, seed=0)

    def single() -> None:
        for i in range(n):
            buf.push(
                {"obs": obs[i], "next_obs": nobs[i], "action": act[i], "reward": rew[i],
                 "terminated": term[i], "truncated": trunc[i]}
            )  # fmt: skip

    out["push_single"] = rate(n, single)
    buf = DequeBuffer(n, seed=0)
    chunks = [{k: v[s : s + 8] for k, v in d.items()} for s in range(0, n, 8)]
    out["push_batch8"] = rate(n, lambda: [buf.push_batch(c) for c in chunks])
    out["sample"] = best_rate(samples, lambda k: [buf.sample_batch(BATCH) for _ in range(k)])
    out["sample_replace"] = best_rate(samples, lambda k: [buf.sample_batch(BATCH, replace=True) for _ in range(k)])

    def fill() -> DequeBuffer:
        b = DequeBuffer(n)
        for s in range(0, n, 10_000):
            b.push_batch({k: v[s : s + 10_000] for k, v in d.items()})
        return b

    out["bytes"] = peak_bytes(fill, n)
    return out


def rlpipe_prio_rounds(d: dict[str, np.ndarray], n: int, rounds: int) -> Callable[[int], None]:
    """``k`` rounds of prioritized sample(256) + update(256) on a full buffer of ``n``."""
    per_buf = DequeBuffer(n, seed=0)
    per_buf.use(PriorityExperienceReplay(per_buf))
    for s in range(0, n, 10_000):
        per_buf.push_batch({k: v[s : s + 10_000] for k, v in d.items()})
    new_priority = np.random.default_rng(1).random((rounds, BATCH))

    def prio(k: int) -> None:
        for r in range(k):
            batch = per_buf.sample_batch(BATCH)  # batch.data carries the IS weights ("weight")
            per_buf.update_batch(batch.indices, {"priority": new_priority[r]})

    return prio


def bench_floor(d: dict[str, np.ndarray], n: int, samples: int) -> dict[str, float]:
    obs, nobs, act, rew, term, trunc = (d[k] for k in FIELDS)
    out = {}
    ring = NumpyRing(n)
    out["push_single"] = rate(
        n, lambda: [ring.add(obs[i], nobs[i], act[i], rew[i], term[i], trunc[i]) for i in range(n)]
    )
    ring = NumpyRing(n)
    chunks = [{k: v[s : s + 8] for k, v in d.items()} for s in range(0, n, 8)]
    out["push_batch8"] = rate(n, lambda: [ring.add_batch(c) for c in chunks])
    out["sample"] = best_rate(samples, lambda k: [ring.sample(BATCH) for _ in range(k)])

    def fill() -> NumpyRing:
        r = NumpyRing(n)
        for s in range(0, n, 10_000):
            r.add_batch({k: v[s : s + 10_000] for k, v in d.items()})
        return r

    out["bytes"] = peak_bytes(fill, n)
    return out


# ---- libraries ------------------------------------------------------------------------------
LIBRARY_FIGURES = {"numpy_floor": ("push_single", "push_batch8", "sample", "bytes"),
                   "sb3": ("push_single", "push_batch8", "sample", "bytes"),
                   "tianshou": ("push_single", "push_batch8", "sample", "prio")}
"""What each baseline's side measures (a library's figures are null when it is not installed)."""


def bench_sb3(d: dict[str, np.ndarray], n: int, push_n: int, samples: int) -> dict[str, float]:
    import gymnasium as gym
    from stable_baselines3.common.buffers import ReplayBuffer

    obs_space = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)
    act_space = gym.spaces.Discrete(2)
    obs, nobs, act, rew = d["obs"], d["next_obs"], d["action"], d["reward"]
    done = d["terminated"] | d["truncated"]
    out = {}
    rb = ReplayBuffer(n, obs_space, act_space, device="cpu", n_envs=1)
    info = [{}]
    out["push_single"] = rate(
        push_n,
        lambda: [
            rb.add(obs[i], nobs[i], act[i], rew[i : i + 1], done[i : i + 1], info) for i in range(push_n)
        ],
    )
    rb = ReplayBuffer(n, obs_space, act_space, device="cpu", n_envs=8)
    infos = [{} for _ in range(8)]
    out["push_batch8"] = rate(
        n,
        lambda: [
            rb.add(
                obs[s : s + 8], nobs[s : s + 8], act[s : s + 8, None], rew[s : s + 8], done[s : s + 8], infos
            )
            for s in range(0, n, 8)
        ],
    )
    out["sample"] = best_rate(samples, lambda k: [rb.sample(BATCH) for _ in range(k)])

    def fill() -> ReplayBuffer:
        b = ReplayBuffer(n, obs_space, act_space, device="cpu", n_envs=1)
        for s in range(0, n, 10_000):
            b.add(obs[s : s + 1], nobs[s : s + 1], act[s : s + 1], rew[s : s + 1], done[s : s + 1], info)
        return b

    out["bytes"] = peak_bytes(fill, n)
    return out


def bench_tianshou(d: dict[str, np.ndarray], n: int, push_n: int, samples: int) -> dict[str, float]:
    from tianshou.data import Batch, ReplayBuffer, VectorReplayBuffer

    obs, nobs, act, rew, term, trunc = (d[k] for k in FIELDS)
    out = {}
    rb = ReplayBuffer(n)
    out["push_single"] = rate(
        push_n,
        lambda: [
            rb.add(
                Batch(
                    obs=obs[i],
                    act=act[i],
                    rew=rew[i],
                    terminated=term[i],
                    truncated=trunc[i],
                    obs_next=nobs[i],
                )
            )
            for i in range(push_n)
        ],
    )
    vb = VectorReplayBuffer(push_n, 8)
    ids = np.arange(8)
    out["push_batch8"] = rate(
        push_n,
        lambda: [
            vb.add(
                Batch(obs=obs[s : s + 8], act=act[s : s + 8], rew=rew[s : s + 8], terminated=term[s : s + 8],
                      truncated=trunc[s : s + 8], obs_next=nobs[s : s + 8]),
                buffer_ids=ids,
            )
            for s in range(0, push_n, 8)
        ],
    )  # fmt: skip
    done = term | trunc
    full = ReplayBuffer.from_data(obs, act, rew, term, trunc, done, nobs)
    out["sample"] = best_rate(samples, lambda k: [full.sample(BATCH) for _ in range(k)])
    return out


def tianshou_prio_rounds(d: dict[str, np.ndarray], n: int, rounds: int) -> Callable[[int], None]:
    """The same rounds as :func:`rlpipe_prio_rounds` on Tianshou's PrioritizedReplayBuffer."""
    from tianshou.data import Batch, PrioritizedReplayBuffer

    obs, nobs, act, rew, term, trunc = (d[k] for k in FIELDS)
    done = term | trunc
    prb = PrioritizedReplayBuffer(n, alpha=0.6, beta=0.4)
    # filled the way ReplayBuffer.from_data fills a buffer, then given the initial priority
    prb.set_batch(
        Batch(obs=obs, act=act, rew=rew, terminated=term, truncated=trunc, done=done, obs_next=nobs)
    )
    prb._size = n
    prb.init_weight(np.arange(n))
    new_priority = np.random.default_rng(1).random((rounds, BATCH))

    def prio(k: int) -> None:
        for r in range(k):
            _, index = prb.sample(BATCH)  # the batch carries the IS weights ("weight")
            prb.update_weight(index, new_priority[r])

    return prio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny run (seconds)")
    parser.add_argument("--n", type=int, default=1_000_000, help="transitions pushed / buffer size")
    parser.add_argument("--lib-push-n", type=int, default=200_000, help="pushes timed for the libraries")
    parser.add_argument("--samples", type=int, default=10_000, help="uniform batches of 256 sampled")
    parser.add_argument("--prio-rounds", type=int, default=10_000, help="priority sample+update rounds")
    args = parser.parse_args()
    if args.quick:
        args.n, args.lib_push_n, args.samples, args.prio_rounds = 20_000, 4_000, 500, 500
    push_n = min(args.lib_push_n, args.n)
    have_sb3, have_tianshou = peer_installed("stable_baselines3"), peer_installed("tianshou")
    data = cartpole(args.n)
    ours = bench_rlpipe(data, args.n, args.samples)
    results: dict[str, dict[str, float] | None] = {
        "rlpipe": ours,
        "numpy_floor": bench_floor(data, args.n, args.samples),
        "sb3": bench_sb3(data, args.n, push_n, args.samples) if have_sb3 else None,
        "tianshou": bench_tianshou(data, args.n, push_n, args.samples) if have_tianshou else None,
    }
    prio_rounds = {"rlpipe": rlpipe_prio_rounds(data, args.n, args.prio_rounds)}
    if have_tianshou:
        prio_rounds["tianshou"] = tianshou_prio_rounds(data, args.n, args.prio_rounds)
    for name, prio_rate in best_rates(args.prio_rounds, prio_rounds).items():
        results[name]["prio"] = prio_rate  # type: ignore[index]
    print(
        f"{'':12s} {'push 1/s':>12s} {'push 8/s':>12s} {'batches/s':>10s} {'prio r/s':>10s} {'B/trans':>8s}"
    )
    for name, res in results.items():
        if res is None:
            print(f"{name:12s} skipped: not installed")
            continue
        cells = [res.get(k) for k in ("push_single", "push_batch8", "sample", "prio", "bytes")]
        print(f"{name:12s} " + " ".join(f"{c:>12,.0f}" if c is not None else f"{'-':>12s}" for c in cells))
    figures: dict[str, Any] = {
        "n": args.n,
        "lib_push_n": push_n,
        "raw_bytes_per_transition": RAW_BYTES,
        **{f"rlpipe_{k}": round(v, 1) for k, v in ours.items()},
        "memory_vs_raw_ratio": round(ours["bytes"] / RAW_BYTES, 3),
    }
    for name, keys in LIBRARY_FIGURES.items():
        res = results[name]
        for key in keys:
            theirs = None if res is None else res[key]  # None: a library that is not installed
            figures[f"{name}_{key}"] = None if theirs is None else round(theirs, 1)
            if key != "bytes":
                # the others sample with replacement: compare with rlpipe doing the same
                mine = ours["sample_replace"] if key == "sample" else ours[key]
                figures[f"{key}_vs_{name}_ratio"] = None if theirs is None else round(mine / theirs, 3)
    libs = [lib["sample"] for lib in (results["sb3"], results["tianshou"]) if lib is not None]
    fastest = max(libs) if libs else None
    figures["sample_vs_fastest_lib_ratio"] = None if fastest is None else round(ours["sample_replace"] / fastest, 3)
    figures["sample_no_replace_vs_fastest_lib_ratio"] = None if fastest is None else round(ours["sample"] / fastest, 3)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
