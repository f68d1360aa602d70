"""Env steps per second through ``StepCollector`` against a bare gymnasium vector loop.

Both step 8 CartPole-v1 environments (same-step auto-reset) and choose actions with the
same Q-network and epsilon; the baseline does nothing else, the collector also builds the
columnar transition batch the buffer receives. Prints the ratio; ends with a JSON line.

    python benchmarks/collector.py [--steps N] [--repeats R] [--quick]
"""

from __future__ import annotations

import argparse
import json
import time

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode

from rlpipe.config import load_config
from rlpipe.envs import VectorEnv, VectorEnvManager, env_factory
from rlpipe.framework import OnlineRLContext
from rlpipe.framework.middleware import StepCollector
from rlpipe.policy import DQNPolicy

NUM_ENVS = 8
EPS = 0.1


def bare_loop(net: torch.nn.Module, vector_steps: int) -> float:
    """Env steps/s of the plainest loop: obs -> network -> eps-greedy -> env.step."""
    env = gym.make_vec(
        "CartPole-v1",
        num_envs=NUM_ENVS,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
    )
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=0)
    start = time.perf_counter()
    for _ in range(vector_steps):
        with torch.inference_mode():
            action = net(torch.as_tensor(obs)).argmax(dim=1).numpy()
        explore = rng.random(NUM_ENVS) < EPS
        action = np.where(explore, rng.integers(2, size=NUM_ENVS), action)
        obs, *_ = env.step(action)
    elapsed = time.perf_counter() - start
    env.close()
    return vector_steps * NUM_ENVS / elapsed


def timed_collection(cfg, policy, env: VectorEnv, eps: float, vector_steps: int) -> float:
    """Env steps/s of ``StepCollector`` over ``env`` (closed after) for about ``vector_steps``
    vector steps, ``cfg.policy.collect.n_sample`` per call; also ``benchmarks/atari.py``'s."""
    collector = StepCollector(cfg, policy.collect_mode, env)
    ctx = OnlineRLContext()
    ctx.collect_kwargs["eps"] = eps
    calls = max(1, vector_steps * env.num_envs // cfg.policy.collect.n_sample)
    start = time.perf_counter()
    for _ in range(calls):
        collector(ctx)
    elapsed = time.perf_counter() - start
    env.close()
    return ctx.env_step / elapsed


def rlpipe_collector(policy: DQNPolicy, cfg, vector_steps: int) -> float:
    """Env steps/s of ``StepCollector`` (n_sample = 96 per call, like the preset)."""
    return timed_collection(cfg, policy, VectorEnvManager(env_factory("CartPole-v1"), NUM_ENVS, seed=0), EPS,
                            vector_steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4000, help="vector steps per measurement")
    parser.add_argument("--repeats", type=int, default=10, help="rounds of each, interleaved; the best of each counts")
    parser.add_argument("--quick", action="store_true", help="a tiny run (smoke test)")
    args = parser.parse_args()
    steps, repeats = (200, 1) if args.quick else (args.steps, args.repeats)
    torch.set_num_threads(1)
    torch.manual_seed(0)  # the same untrained network every run: it sets how long episodes last, so the work per step
    cfg = load_config("cartpole-dqn", ["policy.model.obs_shape=4", "policy.model.action_shape=2"])
    policy = DQNPolicy(cfg.policy)
    # interleave the two so that machine noise hits both alike; keep the best of each
    bare, ours = 0.0, 0.0
    for _ in range(repeats):
        bare = max(bare, bare_loop(policy.model, steps))
        ours = max(ours, rlpipe_collector(policy, cfg, steps))
    ratio = ours / bare
    print(f"bare gymnasium loop : {bare:10.0f} env steps/s")
    print(f"rlpipe StepCollector: {ours:10.0f} env steps/s  ({ratio:.2f}x of the bare loop, goal >= 0.8)")
    print(
        json.dumps(
            {
                "bare_env_steps_per_s": round(bare),
                "collector_env_steps_per_s": round(ours),
                "collector_ratio": round(ratio, 3),
            }
        )
    )


if __name__ == "__main__":
    main()
