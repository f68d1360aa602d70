"""Atari DQN against Stable-Baselines3 and ale-py: updates, collection, sampling, replay memory.

Every figure is a ratio against a baseline measured in this run, on one torch thread. The two
sides of each speed ratio are measured in alternating rounds and the best round of each counts
(slower rounds measure other load on the machine, not the code).

- ``update_sb3_ratio``: DQN updates/s of rlpipe (``OffPolicyLearner`` over the frame-store buffer
  and ``DQNPolicy``: sample 32 transitions, the Huber TD loss, Adam, gradient norm clipped to 10)
  against SB3's ``DQN.train`` (its ``ReplayBuffer`` with ``optimize_memory_usage``, the same loss,
  Adam and clipping), both with the Nature CNN over ``uint8 [4, 84, 84]`` stacks (float32), the
  settings of the ``pong-dqn`` preset (lr 1e-4, gamma 0.99, plain DQN targets), batch 32, and the
  same stored transitions. SB3's network gets rlpipe's initial weights: the same network.
- ``update_bf16_sb3_ratio``: the same with rlpipe's updates in ``policy.learn.precision=bf16-mixed``
  (bfloat16 convolutions and products; weights, Adam and the loss in float32) against SB3 in
  float32, where the CPU has native bfloat16 arithmetic (else null, and one line says why).
- ``collector_ratio``: env steps/s of ``StepCollector`` over ``AleVectorEnv`` (8 Pong games, the
  ``pong-dqn`` preset's settings, greedy actions) against a bare loop over ale-py's
  ``AtariVectorEnv`` with the same game settings and the same policy network
  (``obs -> network -> argmax -> step``, nothing else).
- ``sample_sb3_ratio``: ``sample_batch(32)`` on a full frame-store buffer of ``--buffer``
  (200,000) transitions (``obs`` and ``next_obs`` stacks rebuilt from frames) against SB3's
  ``ReplayBuffer(optimize_memory_usage=True).sample(32)`` holding the same transitions (each
  library's own sampling call: SB3's also makes torch tensors, rlpipe's learner does that later).
- ``bytes_per_transition``: resident memory of a full 1M-transition frame store, allocated and
  filled, per transition (``benchmarks/frames.py``'s measurement, in a fresh process so that no
  memory freed here is reused; ``--skip-1m`` measures a ``--buffer``-sized store instead).

The transitions are ``benchmarks/frames.py``'s synthetic Atari stream (8 envs, one new 84x84
frame per env step, 400-step episodes): what the buffers hold, not what the network learns from,
decides these costs. Needs the ``atari`` and ``bench`` extras (ale-py, stable-baselines3); without
stable-baselines3 its side is skipped (one line says so) and the SB3 figures are null.

Usage: ``python benchmarks/atari.py [--skip-1m] [--quick]``. The last line printed is JSON.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from contextlib import closing
from functools import partial
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch
from collector import timed_collection  # benchmarks/collector.py and frames.py: this script's folder is on the path
from frames import ENVS, atari_steps
from peers import peer_installed

from rlpipe.config import Config, load_config
from rlpipe.data import DequeBuffer
from rlpipe.envs.atari import FRAME_SKIP, FRAME_STACK, SCREEN_SIZE, AtariSettings, atari_game
from rlpipe.framework import OnlineRLContext
from rlpipe.framework.middleware import OffPolicyLearner
from rlpipe.recipes.build import fill_model_shapes, make_buffer, make_policy
from rlpipe.recipes.envs import make_vector_env
from rlpipe.utils.precision import bf16_fallback_reason

GAME = "ALE/Pong-v5"
BATCH = 32
OBS_SPACE = gym.spaces.Box(0, 255, (FRAME_STACK, SCREEN_SIZE, SCREEN_SIZE), np.uint8)
N_ACTIONS = 6  # Pong's minimal action set


def pong_config(buffer_size: int, precision: str = "fp32") -> Config:
    """The ``pong-dqn`` preset with 8 ``ale_vector`` envs, a ``buffer_size`` buffer, one torch thread,
    updates in ``precision``, and its model shapes filled in."""
    cfg = load_config("pong-dqn", [
        "env.backend=ale_vector", f"env.collector_env_num={ENVS}", "env.evaluator_env_num=1",
        f"policy.other.replay_buffer.replay_buffer_size={buffer_size}", f"policy.learn.batch_size={BATCH}",
        "run.torch_threads=1", f"policy.learn.precision={precision}",
    ])
    with closing(make_vector_env(cfg, 1, 0)) as env:
        return fill_model_shapes(cfg, env)


class _Spaces(gym.Env):
    """An env that only has Pong's spaces: SB3's DQN wants one to size its network and buffer."""

    observation_space = OBS_SPACE
    action_space = gym.spaces.Discrete(N_ACTIONS)


def sb3_dqn(cfg: Config, network: torch.nn.Module, buffer_size: int):
    """SB3's DQN with the Nature CNN, ``cfg``'s settings and ``network``'s weights; its buffer
    (``optimize_memory_usage``) holds ``ENVS`` envs' chains, as rlpipe's does."""
    from stable_baselines3 import DQN
    from stable_baselines3.common.logger import configure
    from stable_baselines3.common.vec_env import DummyVecEnv

    learn = cfg.policy.learn
    model = DQN("CnnPolicy", DummyVecEnv([_Spaces] * ENVS), learning_rate=learn.learning_rate,
                buffer_size=buffer_size, learning_starts=0, batch_size=BATCH, gamma=cfg.policy.discount_factor,
                max_grad_norm=learn.grad_clip, optimize_memory_usage=True,
                replay_buffer_kwargs={"handle_timeout_termination": False}, device="cpu", seed=0)
    model.set_logger(configure(None, []))
    ours, theirs = list(network.parameters()), list(model.q_net.parameters())
    if [p.shape for p in ours] != [p.shape for p in theirs]:
        raise RuntimeError("SB3's CnnPolicy is not rlpipe's Nature CNN: "
                           f"{[tuple(p.shape) for p in theirs]} vs {[tuple(p.shape) for p in ours]}")
    with torch.no_grad():
        for mine, sb3 in zip(ours, theirs, strict=True):
            sb3.copy_(mine)
    model.q_net_target.load_state_dict(model.q_net.state_dict())
    return model


def fill_both(buffer: DequeBuffer, sb3_buffer, size: int) -> None:
    """Push the same ``size`` synthetic transitions (``ENVS`` per vector step) into both buffers
    (into rlpipe's alone if ``sb3_buffer`` is None)."""
    steps = atari_steps(400)
    pushed = 0
    while pushed < size:
        rows = next(steps)
        buffer.push_batch(rows, {"train_iter_data_collected": np.zeros(ENVS, dtype=np.int64)})
        done = rows["terminated"] | rows["truncated"]
        if sb3_buffer is not None:
            sb3_buffer.add(rows["obs"], rows["next_obs"], rows["action"][:, None], rows["reward"], done,
                           [{} for _ in range(ENVS)])
        pushed += ENVS


def best_rate(measure, rounds: int) -> float:
    return max(measure() for _ in range(rounds))


def update_rates(learners: Mapping[str, OffPolicyLearner], model, updates: int, rounds: int) -> dict[str, float]:
    """Updates/s of each of rlpipe's ``learners`` (by name) and of SB3's ``DQN.train`` (``sb3``, unless
    ``model`` is None), best of ``rounds`` rounds in which each runs in turn."""

    def ours(learner: OffPolicyLearner) -> float:
        ctx = OnlineRLContext()
        done, start = 0, time.perf_counter()
        while done < updates:
            learner(ctx)
            done += len(ctx.train_output)
        return done / (time.perf_counter() - start)

    def sb3() -> float:
        start = time.perf_counter()
        model.train(gradient_steps=updates, batch_size=BATCH)
        return updates / (time.perf_counter() - start)

    measures: dict[str, Callable[[], float]] = {name: partial(ours, learner) for name, learner in learners.items()}
    if model is not None:
        measures["sb3"] = sb3
    for measure in measures.values():  # warm-up: first calls allocate
        measure()
    best = dict.fromkeys(measures, 0.0)
    for _ in range(rounds):
        for name, measure in measures.items():
            best[name] = max(best[name], measure())
    return best


def sample_rates(buffer: DequeBuffer, sb3_buffer, calls: int, rounds: int) -> tuple[float, float | None]:
    """``sample(32)`` calls per second of both buffers, best of ``rounds`` alternating rounds (SB3's
    None if ``sb3_buffer`` is)."""

    def timed(sample) -> float:
        start = time.perf_counter()
        for _ in range(calls):
            sample(BATCH)
        return calls / (time.perf_counter() - start)

    if sb3_buffer is None:
        buffer.sample_batch(BATCH)  # warm-up: the first call compiles rlpipe's sampler
        return max(timed(buffer.sample_batch) for _ in range(rounds)), None
    buffer.sample_batch(BATCH), sb3_buffer.sample(BATCH)  # warm-up: the first call compiles rlpipe's sampler
    rates = [(timed(buffer.sample_batch), timed(sb3_buffer.sample)) for _ in range(rounds)]
    return max(r[0] for r in rates), max(r[1] for r in rates)


def bare_ale_loop(network: torch.nn.Module, settings: AtariSettings, vector_steps: int) -> float:
    """Env steps/s of ale-py's ``AtariVectorEnv`` (``AleVectorEnv``'s game settings) driven by
    ``network``'s greedy actions and nothing else."""
    from ale_py.vector_env import AtariVectorEnv

    env = AtariVectorEnv(atari_game(GAME), ENVS, num_threads=0,
                         repeat_action_probability=settings.repeat_action_probability,
                         full_action_space=settings.full_action_space,
                         max_num_frames_per_episode=settings.max_episode_steps * FRAME_SKIP,
                         autoreset_mode=gym.vector.AutoresetMode.SAME_STEP, img_height=SCREEN_SIZE,
                         img_width=SCREEN_SIZE, stack_num=FRAME_STACK, frameskip=FRAME_SKIP,
                         noop_max=settings.noop_max, use_fire_reset=True, episodic_life=False,
                         life_loss_info=False, reward_clipping=False)
    obs, _ = env.reset(seed=0)
    start = time.perf_counter()
    for _ in range(vector_steps):
        with torch.inference_mode():
            action = network(torch.as_tensor(obs)).argmax(dim=1).numpy()
        obs, *_ = env.step(action)
    elapsed = time.perf_counter() - start
    env.close()
    return vector_steps * ENVS / elapsed


def collector_rate(cfg: Config, policy, vector_steps: int) -> float:
    """Env steps/s of ``StepCollector`` over ``AleVectorEnv`` (training envs, as a run makes them), greedy."""
    return timed_collection(cfg, policy, make_vector_env(cfg, ENVS, 0, train=True), 0.0, vector_steps)


def frame_store_memory(transitions: int) -> dict[str, float]:
    """``benchmarks/frames.py``'s figures for a ``transitions``-sized store, from a fresh process."""
    script = Path(__file__).resolve().parent / "frames.py"
    out = subprocess.run([sys.executable, str(script), "--transitions", str(transitions), "--sample-calls", "1"],
                         check=True, capture_output=True, text=True).stdout
    figures: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--buffer", type=int, default=200_000, help="transitions in the sampled buffers")
    parser.add_argument("--updates", type=int, default=40, help="updates per round")
    parser.add_argument("--vector-steps", type=int, default=300, help="vector steps (8 envs) per collector round")
    parser.add_argument("--sample-calls", type=int, default=2000, help="sample(32) calls per round")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds; the best of each counts")
    parser.add_argument("--skip-1m", action="store_true", help="memory of a --buffer-sized store, not 1M")
    parser.add_argument("--quick", action="store_true", help="a tiny run (smoke test)")
    args = parser.parse_args()
    if args.quick:
        args.buffer, args.updates, args.vector_steps, args.sample_calls, args.rounds = 4000, 2, 10, 50, 1
        args.skip_1m = True
    torch.set_num_threads(1)

    memory = frame_store_memory(args.buffer if args.skip_1m else 1_000_000)  # first: before this process grows
    print(f"frame store of {memory['transitions']:,} transitions: {memory['bytes_per_transition']:,.0f} bytes each")

    cfg = pong_config(args.buffer)
    torch.manual_seed(0)
    policy = make_policy(cfg)
    buffer = make_buffer(cfg)
    model = sb3_dqn(cfg, policy.model, args.buffer) if peer_installed("stable_baselines3") else None
    sb3_buffer = None if model is None else model.replay_buffer
    fill_both(buffer, sb3_buffer, args.buffer)

    ours_sample, sb3_sample = sample_rates(buffer, sb3_buffer, args.sample_calls, args.rounds)
    sample_ratio = None if sb3_sample is None else round(ours_sample / sb3_sample, 3)
    sb3_text = "skipped" if sb3_sample is None else f"{1e6 / sb3_sample:.0f} us ({sample_ratio:.2f}x, goal >= 1.5)"
    print(f"sample(32), full {args.buffer:,} buffer: rlpipe {1e6 / ours_sample:.0f} us, SB3 {sb3_text}")
    learners = {"fp32": OffPolicyLearner(cfg, policy.learn_mode, buffer)}
    no_bf16 = bf16_fallback_reason(torch.device("cpu"))
    if no_bf16 is None:
        bf16_cfg = pong_config(args.buffer, "bf16-mixed")
        torch.manual_seed(0)  # the same initial weights
        learners["bf16"] = OffPolicyLearner(bf16_cfg, make_policy(bf16_cfg).learn_mode, buffer)
    rates = update_rates(learners, model, args.updates, args.rounds)
    sb3_update = rates.get("sb3")
    update_ratio = None if sb3_update is None else round(rates["fp32"] / sb3_update, 3)
    sb3_text = "skipped" if sb3_update is None else f"{sb3_update:.2f}/s ({update_ratio:.2f}x, goal >= 1.3)"
    print(f"Nature CNN updates (batch 32): rlpipe {rates['fp32']:.2f}/s, SB3 {sb3_text}")
    bf16_ratio = None
    if no_bf16 is None:
        bf16_ratio = None if sb3_update is None else round(rates["bf16"] / sb3_update, 3)
        versus = "" if bf16_ratio is None else f" ({bf16_ratio:.2f}x SB3's float32)"
        print(f"  with bf16-mixed products: rlpipe {rates['bf16']:.2f}/s{versus}")
    else:
        print(f"  bf16-mixed not measured: {no_bf16}")
    del model, buffer, learners  # the collectors need no buffers

    settings = AtariSettings(**cfg.env.atari.model_dump()) if cfg.env.atari is not None else AtariSettings()
    bare, ours_collect = 0.0, 0.0
    for _ in range(args.rounds):
        bare = max(bare, bare_ale_loop(policy.model, settings, args.vector_steps))
        ours_collect = max(ours_collect, collector_rate(cfg, policy, args.vector_steps))
    print(f"collection, 8 Pong envs, greedy: rlpipe {ours_collect:.0f} env steps/s, bare ale-py {bare:.0f} "
          f"({ours_collect / bare:.2f}x, goal >= 0.9)")
    print(json.dumps({
        "update_sb3_ratio": update_ratio,
        "rlpipe_updates_per_s": round(rates["fp32"], 2),
        "sb3_updates_per_s": None if sb3_update is None else round(sb3_update, 2),
        "update_bf16_sb3_ratio": bf16_ratio,
        "rlpipe_bf16_updates_per_s": round(rates["bf16"], 2) if "bf16" in rates else None,
        "collector_ratio": round(ours_collect / bare, 3),
        "collector_env_steps_per_s": round(ours_collect), "bare_ale_env_steps_per_s": round(bare),
        "sample_sb3_ratio": sample_ratio,
        "rlpipe_sample32_us": round(1e6 / ours_sample, 1),
        "sb3_sample32_us": None if sb3_sample is None else round(1e6 / sb3_sample, 1),
        "sampled_buffer": args.buffer,
        "bytes_per_transition": memory["bytes_per_transition"], "bytes_transitions": memory["transitions"],
    }))


if __name__ == "__main__":
    main()
