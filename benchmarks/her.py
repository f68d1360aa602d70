"""HER relabelling throughput: ``HerRewardModel.relabel_batch`` vs a per-transition Python loop.

Both relabel the same bit-flip episodes (15 bits, 15 steps, obs = concat(state, goal)) with
the ``future`` strategy and ``her_replay_k`` copies, using the same default split, merge and
goal reward functions, into one columnar batch (obs, action, reward, next_obs, terminated,
truncated). The loop is what a straightforward implementation does: per transition and copy,
draw a future step, split, merge, compute the reward, then stack the rows into arrays.
Rounds of the two alternate so that machine noise hits both alike; the median round of
each is reported.

Usage: ``python benchmarks/her.py [--quick]``. The last line printed is JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from rlpipe.reward_model import HerRewardModel, equal_goal_reward, merge_state_goal, split_state_goal

N_BITS = 15
FIELDS = ("obs", "action", "reward", "next_obs", "terminated", "truncated")


def bitflip_episodes(n: int, rng: np.random.Generator) -> list[dict[str, np.ndarray]]:
    """Random-policy bit-flip episodes of N_BITS steps (none reaches its goal by luck here)."""
    episodes = []
    for _ in range(n):
        actions = rng.integers(0, N_BITS, N_BITS)
        states = np.empty((N_BITS + 1, N_BITS), dtype=np.float32)
        states[0] = rng.integers(0, 2, N_BITS)
        for t, bit in enumerate(actions):
            states[t + 1] = states[t]
            states[t + 1, bit] = 1.0 - states[t, bit]
        goal = np.repeat(rng.integers(0, 2, (1, N_BITS)).astype(np.float32), N_BITS, axis=0)
        episodes.append(
            {
                "obs": np.concatenate([states[:-1], goal], axis=1),
                "action": actions.astype(np.int64),
                "reward": np.zeros(N_BITS, dtype=np.float32),
                "next_obs": np.concatenate([states[1:], goal], axis=1),
                "terminated": np.zeros(N_BITS, dtype=bool),
                "truncated": np.arange(N_BITS) == N_BITS - 1,
            }
        )
    return episodes


def loop_relabel(
    episodes: list[dict[str, np.ndarray]], k: int, rng: np.random.Generator
) -> dict[str, np.ndarray]:
    """The baseline: one Python iteration per relabelled transition, rows stacked at the end."""
    rows: dict[str, list] = {field: [] for field in FIELDS}
    for _ in range(k):
        for ep in episodes:
            T = len(ep["obs"])
            for t in range(T):
                g = int(rng.integers(t, T))
                _, _, new_goal = split_state_goal(ep["next_obs"][g])
                state, _, _ = split_state_goal(ep["obs"][t])
                next_state, _, achieved = split_state_goal(ep["next_obs"][t])
                reward = equal_goal_reward(achieved, new_goal)
                rows["obs"].append(merge_state_goal(state, new_goal))
                rows["next_obs"].append(merge_state_goal(next_state, new_goal))
                rows["reward"].append(reward)
                rows["terminated"].append(reward > 0)
                rows["action"].append(ep["action"][t])
                rows["truncated"].append(ep["truncated"][t])
    return {field: np.stack(values) for field, values in rows.items()}


def timed(fn, *args) -> tuple[float, int]:
    start = time.perf_counter()
    batch = fn(*args)
    return time.perf_counter() - start, len(batch["obs"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny run (a smoke test, not a measurement)")
    args = parser.parse_args()
    n_episode, k, rounds = (16, 2, 2) if args.quick else (256, 4, 7)

    episodes = bitflip_episodes(n_episode, np.random.default_rng(0))
    her = HerRewardModel({"her_strategy": "future", "her_replay_k": k})
    rng = np.random.default_rng(1)
    her.relabel_batch(episodes, rng)  # warm-up (first-call allocations)

    batched, loop = [], []
    for _ in range(rounds):
        seconds, n = timed(her.relabel_batch, episodes, rng)
        batched.append(n / seconds)
        seconds, n = timed(loop_relabel, episodes, k, rng)
        loop.append(n / seconds)
    batched_rate, loop_rate = statistics.median(batched), statistics.median(loop)
    ratio = batched_rate / loop_rate
    print(f"HER future relabelling, {n_episode} episodes x {N_BITS} steps x k={k} per batch, {rounds} rounds")
    print(f"  batched relabel_batch: {batched_rate:12,.0f} transitions/s")
    print(f"  per-transition loop:   {loop_rate:12,.0f} transitions/s")
    print(f"  speedup: {ratio:.1f}x (goal >= 20x)")
    print(
        json.dumps(
            {
                "batched_transitions_per_s": round(batched_rate),
                "loop_transitions_per_s": round(loop_rate),
                "her_speedup_ratio": round(ratio, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
