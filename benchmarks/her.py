"""HER relabelling throughput: ``HerRewardModel.relabel_batch`` vs a per-transition Python loop,
and the cost of goal functions written per transition (the seed's way) against batched ones.

All relabel the same bit-flip episodes (15 bits, 15 steps, obs = concat(state, goal)) with
the ``future`` strategy and ``her_replay_k`` copies into one columnar batch (obs, action,
reward, next_obs, terminated, truncated):

- batched: ``relabel_batch`` with rlpipe's default (batched) split, merge and goal reward;
- loop: what a straightforward implementation does with those defaults: per transition and
  copy, draw a future step, split, merge, compute the reward, then stack the rows;
- per-transition numpy: ``relabel_batch`` with the same functions written for one observation
  in numpy (``x[:n], x[n:], x[:n]``, ``np.concatenate``, a float reward), called once per row;
- per-transition seed: the seed's own default functions (``torch.chunk(x, 2)``,
  ``torch.cat``, a reward of ``torch.FloatTensor([1])`` or ``[0]``) on the same episodes as
  torch tensors, called once per row, tensors back.

Both per-transition runs are first checked to give the batched run's batch. Rounds alternate
so that machine noise hits all alike; the median round of each is reported. The cost ratios
are batched rate / per-transition rate (how many times slower per-transition functions are).

Usage: ``python benchmarks/her.py [--quick]``. The last line printed is JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
import torch

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


def numpy_split(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Split written for one observation (a user's per-transition function)."""
    return x[:N_BITS], x[N_BITS:], x[:N_BITS]


def numpy_merge(state: np.ndarray, goal: np.ndarray) -> np.ndarray:
    return np.concatenate([state, goal])


def numpy_reward(achieved_goal: np.ndarray, desired_goal: np.ndarray) -> float:
    return float(np.array_equal(achieved_goal, desired_goal))


def seed_split(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The seed's default split, for one observation."""
    obs, desired_goal = torch.chunk(x, 2)
    return obs, desired_goal, obs


def seed_merge(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.cat((x, y), dim=0)


def seed_reward(achieved_goal: torch.Tensor, desired_goal: torch.Tensor) -> torch.Tensor:
    if (achieved_goal == desired_goal).all():
        return torch.FloatTensor([1])
    return torch.FloatTensor([0])


def check_same_batch(reference: dict, batch: dict, name: str) -> None:
    """The per-transition run relabels exactly as the batched one (so the timings compare like with like)."""
    for key, column in reference.items():
        got = batch[key].numpy() if isinstance(batch[key], torch.Tensor) else batch[key]
        if not np.array_equal(got, column):
            raise SystemExit(f"{name}: field {key!r} differs from the batched run")


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
    tensor_episodes = [{key: torch.from_numpy(column) for key, column in ep.items()} for ep in episodes]
    her = HerRewardModel({"her_strategy": "future", "her_replay_k": k})
    runs = {
        "batched": lambda rng: her.relabel_batch(episodes, rng),
        "loop": lambda rng: loop_relabel(episodes, k, rng),
        "numpy": lambda rng: her.relabel_batch(episodes, rng, numpy_merge, numpy_split, numpy_reward),
        "seed": lambda rng: her.relabel_batch(tensor_episodes, rng, seed_merge, seed_split, seed_reward),
    }
    reference = runs["batched"](np.random.default_rng(1))  # also the warm-up (first-call allocations)
    for name in ("numpy", "seed"):
        check_same_batch(reference, runs[name](np.random.default_rng(1)), name)

    rng = np.random.default_rng(1)
    rates: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            seconds, n = timed(run, rng)
            rates[name].append(n / seconds)
    rate = {name: statistics.median(values) for name, values in rates.items()}
    speedup = rate["batched"] / rate["loop"]
    numpy_cost, seed_cost = rate["batched"] / rate["numpy"], rate["batched"] / rate["seed"]
    print(f"HER future relabelling, {n_episode} episodes x {N_BITS} steps x k={k} per batch, {rounds} rounds")
    print(f"  batched relabel_batch:                {rate['batched']:12,.0f} transitions/s")
    print(f"  per-transition loop:                  {rate['loop']:12,.0f} transitions/s")
    print(f"  speedup: {speedup:.1f}x (goal >= 20x)")
    print(f"  per-transition functions, numpy:      {rate['numpy']:12,.0f} transitions/s ({numpy_cost:.1f}x slower)")
    print(f"  per-transition functions, seed torch: {rate['seed']:12,.0f} transitions/s ({seed_cost:.1f}x slower)")
    print(
        json.dumps(
            {
                "batched_transitions_per_s": round(rate["batched"]),
                "loop_transitions_per_s": round(rate["loop"]),
                "per_transition_numpy_transitions_per_s": round(rate["numpy"]),
                "per_transition_seed_transitions_per_s": round(rate["seed"]),
                "her_speedup_ratio": round(speedup, 2),
                "per_transition_numpy_cost_ratio": round(numpy_cost, 2),
                "per_transition_seed_cost_ratio": round(seed_cost, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
