"""SAC + HER on FetchReach-v4: rlpipe's ``fetchreach-sac-her`` preset vs Stable-Baselines3, same steps.

Both train SAC with hindsight relabelling for ``--steps`` env steps with the rl-zoo's
FetchReach settings: future goals for 80% of sampled transitions (SB3: ``n_sampled_goal=4``),
[64, 64] networks, gamma 0.95, batch 256, lr 1e-3, 1,000 random steps, normalised
observations (SB3: ``VecNormalize(norm_reward=False)``), one torch thread. SB3 takes the
zoo's one gradient update per env step; rlpipe its preset's one per 2 env steps, or with
``--updates-per-episode 50`` one per step like SB3 (the per-update comparison). Every
``--eval-every`` env steps each is evaluated on 20 episodes with its deterministic action,
and that evaluation is part of the wall time of both.

``wall_ratio = rlpipe wall time / SB3 wall time`` for the same env steps (goal <= 0.5). Also
printed: each one's success-rate curve and the first env step with a success rate >= 0.9.
The two runs go at the same time, each in its own process on its own core (the machine
has two), so that the load of a shared host falls on both alike; ``--one-at-a-time`` runs
them one after the other instead.

Needs the ``robotics`` and ``bench`` extras; without stable-baselines3 only rlpipe's run is made
(one line says so) and SB3's figures are null. Usage: ``python benchmarks/her_fetch.py [--steps N]
[--eval-every N] [--seed S] [--quick]``. The last line printed is JSON.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch
from peers import peer_installed  # benchmarks/peers.py: this script's folder is on the path

from rlpipe.config import load_config
from rlpipe.entry import train
from rlpipe.envs.robotics import import_robotics
from rlpipe.utils.metrics import read_metrics

ENV_ID = "FetchReach-v4"
EVAL_EPISODES = 20
EPISODE_STEPS = 50


def run_rlpipe(steps: int, eval_every: int, seed: int, updates_per_episode: int) -> tuple[float, dict[int, float]]:
    """Wall time and evaluation success rate by env step of the preset's run."""
    cfg = load_config("fetchreach-sac-her", [
        f"seed={seed}", f"run.max_env_step={steps}", "run.progress=false", f"env.n_evaluator_episode={EVAL_EPISODES}",
        f"policy.learn.update_per_collect={updates_per_episode}",
        f"policy.eval.evaluator.eval_freq={eval_every * updates_per_episode // EPISODE_STEPS}",  # train iterations
        f"run.save_freq={steps}",
    ])
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        train(cfg, Path(tmp) / "run")
        wall = time.perf_counter() - start
        curve = {r["env_step"]: r["success_rate"] for r in read_metrics(Path(tmp) / "run") if r["kind"] == "eval"}
    return wall, curve


def run_sb3(steps: int, eval_every: int, seed: int) -> tuple[float, dict[int, float]]:
    """The same with SB3's SAC and HerReplayBuffer, evaluated on a separate env after each chunk."""
    from stable_baselines3 import SAC, HerReplayBuffer
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    start = time.perf_counter()
    env = VecNormalize(DummyVecEnv([lambda: gym.make(ENV_ID)]), norm_obs=True, norm_reward=False)
    model = SAC(
        "MultiInputPolicy", env, buffer_size=1_000_000, ent_coef="auto", batch_size=256, gamma=0.95,
        learning_rate=1e-3, learning_starts=1000, replay_buffer_class=HerReplayBuffer,
        replay_buffer_kwargs={"goal_selection_strategy": "future", "n_sampled_goal": 4},
        policy_kwargs={"net_arch": [64, 64]}, seed=seed, device="cpu",
    )
    evaluator = gym.make(ENV_ID)
    curve = {}
    done = 0
    while done < steps:
        chunk = min(eval_every, steps - done)
        model.learn(chunk, reset_num_timesteps=False)
        done += chunk
        successes = []
        for episode in range(EVAL_EPISODES):
            obs, _ = evaluator.reset(seed=10_000 + seed + done + episode)
            info: dict = {}
            for _ in range(EPISODE_STEPS):
                action, _ = model.predict(env.normalize_obs(obs), deterministic=True)
                obs, _, terminated, truncated, info = evaluator.step(action)
                if terminated or truncated:
                    break
            successes.append(float(info["is_success"]))
        curve[done] = float(np.mean(successes))
    return time.perf_counter() - start, curve


Job = tuple[Callable[[int, int, int], tuple[float, dict[int, float]]], int, int, int]


def run_one(job: Job) -> tuple[float, dict[int, float]]:
    """One runner on one torch thread, with the robotics envs registered (also in a fresh process)."""
    runner, steps, eval_every, seed = job
    torch.set_num_threads(1)
    import_robotics(ENV_ID)
    return runner(steps, eval_every, seed)


def first_at(curve: dict[int, float], level: float = 0.9) -> int | None:
    return next((step for step, value in sorted(curve.items()) if value >= level), None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--eval-every", type=int, default=2_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--one-at-a-time", action="store_true", help="run rlpipe, then SB3 (default: both at once)")
    parser.add_argument("--updates-per-episode", type=int, default=None,
                        help="rlpipe's gradient updates per 50-step episode (default: the preset's 25; SB3 does 50)")
    parser.add_argument("--quick", action="store_true", help="a tiny run (smoke test)")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.eval_every = 1_200, 600  # 1,000 random steps, then 200 with updates
    updates = args.updates_per_episode or load_config("fetchreach-sac-her").policy.learn.update_per_collect
    runners = [partial(run_rlpipe, updates_per_episode=updates)]
    if peer_installed("stable_baselines3"):
        runners.append(run_sb3)
    jobs: list[Job] = [(runner, args.steps, args.eval_every, args.seed) for runner in runners]
    if args.one_at_a_time or len(jobs) == 1:
        results = [run_one(job) for job in jobs]
    else:
        with multiprocessing.get_context("spawn").Pool(len(jobs)) as pool:
            results = pool.map(run_one, jobs)
    rl_wall, rl_curve = results[0]
    sb3_wall, sb3_curve = results[1] if len(results) > 1 else (None, None)
    print(f"rlpipe: {rl_wall:.1f} s, success {rl_curve}")
    ratio = None
    if sb3_wall is not None:
        ratio = rl_wall / sb3_wall
        print(f"sb3:    {sb3_wall:.1f} s, success {sb3_curve}")
        print(f"wall time rlpipe / sb3 = {ratio:.2f} (goal <= 0.5)")
    print(json.dumps({
        "steps": args.steps, "seed": args.seed, "rlpipe_updates_per_episode": updates,
        "rlpipe_wall_s": round(rl_wall, 1), "sb3_wall_s": None if sb3_wall is None else round(sb3_wall, 1),
        "rlpipe_first_success_0_9_step": first_at(rl_curve),
        "sb3_first_success_0_9_step": None if sb3_curve is None else first_at(sb3_curve),
        "rlpipe_final_success": rl_curve[max(rl_curve)],
        "sb3_final_success": None if sb3_curve is None else sb3_curve[max(sb3_curve)],
        "wall_ratio": None if ratio is None else round(ratio, 3),
    }))


if __name__ == "__main__":
    main()
