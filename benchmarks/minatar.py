"""MinAtar DQN side by side with Stable-Baselines3: final return at the same budget, and wall time.

For each seed, both libraries train the ``minatar-<game>-dqn`` preset's DQN from scratch on the same
env (rlpipe's ``MinAtar/<Game>-v1`` as ``uint8 [C, 10, 10]``, MinAtar's own sticky actions), with
the same network (the MinAtar CNN: one 3x3 conv of 16 channels, a 128-unit layer, a linear Q head,
torch's default initialisation; SB3's of torch's plain layers, rlpipe's computing the convolution as
``PatchConv2d`` and storing the dense weight input-major) and settings: 4 envs stepped together and
one update per env step, Adam lr 2.5e-4, batch 32, replay 100k, 5,000 random steps first, target
copy every 1,000 updates, epsilon 1 -> 0.1 over the first 100k env steps, plain DQN targets, Huber
loss, no gradient clipping, gamma 0.99. rlpipe computes subnormal floats as zero
(``run.flush_denormal``, its default), SB3 as IEEE arithmetic does (its users' default). Neither
side evaluates or saves during training (rlpipe's final save of its checkpoint and buffer is counted
in its time). Each run is timed from the start of training to its end, on one torch thread. The two
libraries alternate (even positions in ``--seeds`` train rlpipe first, odd ones SB3 first) so that
changes in the machine's load fall on both; ``--jobs N`` trains N seeds at a time in separate
processes, each under the others' load.

Afterwards each final network plays ``--episodes`` greedy games of the same env with the same
seeds. ``wall_time_sb3_ratio`` is SB3's mean wall time over rlpipe's (>= 2 means rlpipe needs at
most half SB3's time), ``return_sb3_ratio`` rlpipe's mean final return over SB3's (null if SB3's is 0).
Without stable-baselines3 only rlpipe trains (one line says so) and SB3's figures are null.

Usage: ``python benchmarks/minatar.py [--game breakout] [--steps 500000] [--seeds 0 1 2]
[--episodes 100] [--jobs 1] [--out DIR] [--quick]``. Needs the ``minatar`` and ``bench`` extras. The last line
printed is JSON. A full run (3 seeds, 500k steps, both libraries) takes about 4 CPU-hours: 2 hours with
``--jobs 3`` on two cores.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

# benchmarks/peers.py, imported before this script's folder leaves the path
from peers import peer_installed, peer_version

# This file's name shadows the ``minatar`` package for scripts in its folder: drop the folder.
if Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    del sys.path[0]

import gymnasium as gym
import numpy as np
import torch
from torch import nn

import rlpipe
from rlpipe.config import load_config
from rlpipe.entry.evaluate import resolve_checkpoint
from rlpipe.envs.minatar import make_minatar_env
from rlpipe.model.cnn import minatar_cnn_layers
from rlpipe.tools.results import RunResult, write_results
from rlpipe.utils.provenance import machine_description

Policy = Callable[[np.ndarray], int]


def game_env_id(game: str) -> str:
    """``breakout`` -> ``MinAtar/Breakout-v1``."""
    names = {"spaceinvaders": "SpaceInvaders"}
    return f"MinAtar/{names.get(game, game.capitalize())}-v1"


def train_rlpipe(game: str, steps: int, seed: int, out: Path) -> tuple[float, Policy]:
    """Train ``minatar-<game>-dqn`` for ``steps`` env steps; its wall time and greedy policy."""
    run_dir = out / f"rlpipe-{game}-seed{seed}"
    overrides = [f"seed={seed}", f"run.max_env_step={steps}", f"run.save_freq={10 * steps}",
                 f"policy.eval.evaluator.eval_freq={10 * steps}", "run.torch_threads=1"]
    start = time.perf_counter()
    rlpipe.train(f"minatar-{game}-dqn", run_dir, overrides=overrides, overwrite=True)
    wall = time.perf_counter() - start
    return wall, final_policy(run_dir)


def final_policy(run_dir: Path) -> Policy:
    """The greedy policy of a run's final checkpoint (``rlpipe.load(run_dir)`` would take its best
    evaluation's, here the one evaluation at the start of learning)."""
    agent = rlpipe.load(resolve_checkpoint(run_dir, "final"))
    return lambda obs: int(agent.predict(obs))


class MinAtarFeatures(nn.Module):
    """SB3's features extractor holding rlpipe's MinAtar CNN layers (the same network)."""

    def __init__(self, observation_space: gym.spaces.Box) -> None:
        super().__init__()
        layers, self.features_dim = minatar_cnn_layers(observation_space.shape)
        self.net = nn.Sequential(*layers)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs)


def train_sb3(game: str, steps: int, seed: int) -> tuple[float, Policy]:
    """Train SB3's DQN with the preset's settings for ``steps`` env steps; its wall time and greedy policy."""
    from stable_baselines3 import DQN
    from stable_baselines3.common.logger import configure
    from stable_baselines3.common.vec_env import DummyVecEnv

    cfg = load_config(f"minatar-{game}-dqn")
    learn, eps = cfg.policy.learn, cfg.policy.other.eps
    n_envs = cfg.env.collector_env_num
    env_id = game_env_id(game)
    vec_env = DummyVecEnv([lambda: make_minatar_env(env_id)] * n_envs)
    model = DQN(
        "CnnPolicy", vec_env, learning_rate=learn.learning_rate,
        buffer_size=cfg.policy.other.replay_buffer.replay_buffer_size,
        learning_starts=cfg.policy.random_collect_size, batch_size=learn.batch_size,
        gamma=cfg.policy.discount_factor, train_freq=1, gradient_steps=n_envs,
        target_update_interval=learn.target_update_freq, exploration_initial_eps=eps.start,
        exploration_final_eps=eps.end, exploration_fraction=eps.decay / steps, max_grad_norm=float("inf"),
        policy_kwargs={"features_extractor_class": MinAtarFeatures, "net_arch": [], "normalize_images": False},
        device="cpu", seed=seed,
    )
    model.set_logger(configure(None, []))
    start = time.perf_counter()
    model.learn(total_timesteps=steps)
    wall = time.perf_counter() - start
    return wall, lambda obs: int(model.predict(obs, deterministic=True)[0])


def greedy_return(game: str, policy: Policy, episodes: int) -> float:
    """Mean return of ``policy`` over ``episodes`` games seeded 10,000, 10,001, ..."""
    env = make_minatar_env(game_env_id(game))
    returns = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=10_000 + episode)
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(policy(obs))
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    env.close()
    return statistics.fmean(returns)


TRAINERS: dict[str, Callable[[str, int, int, Path], tuple[float, Policy]]] = {
    "rlpipe": train_rlpipe, "sb3": lambda game, steps, seed, out: train_sb3(game, steps, seed),
}
"""Each library's training of one seed: ``(game, steps, seed, out) -> (wall time, greedy policy)``."""


def compare_seed(game: str, steps: int, episodes: int, out: Path, libraries: tuple[str, ...], seed: int,
                 sb3_first: bool) -> dict[str, float | None]:
    """Train each of ``libraries`` at ``seed`` (SB3 first if ``sb3_first``); their wall times and greedy
    returns (None for a library not run)."""
    torch.set_num_threads(1)
    row: dict[str, float | None] = {"seed": seed}
    for library in sorted(libraries, reverse=sb3_first):  # "rlpipe" < "sb3"
        wall, policy = TRAINERS[library](game, steps, seed, out)
        row[f"{library}_wall_s"], row[f"{library}_return"] = wall, greedy_return(game, policy, episodes)
    texts = [f"{lib} {row[f'{lib}_return']:.2f} in {row[f'{lib}_wall_s']:.0f} s" if f"{lib}_return" in row
             else f"{lib} skipped" for lib in TRAINERS]
    print(f"seed {seed}: {', '.join(texts)}", flush=True)
    return {key: row.get(key) for key in ("seed", *(f"{lib}_{what}" for lib in TRAINERS for what in ("wall_s",
                                                                                                      "return")))}


def sb3_results(game: str, steps: int, episodes: int, rows: list[dict[str, float | None]]) -> list[RunResult]:
    """SB3's runs as run results (``rlpipe report``'s format): each seed's final policy over ``episodes``
    greedy games, its wall time, and the settings SB3 trains with (IEEE subnormals, float32). They did not
    evaluate while training, so they have no curve: no best evaluation, no env steps to a threshold."""
    source = f"stable-baselines3 {peer_version('stable_baselines3')} (benchmarks/minatar.py)"
    return [RunResult(group="sb3-dqn", task=game_env_id(game), seed=int(row["seed"] or 0), env_step=[steps],
                      value=[float(row["sb3_return"] or 0.0)], wall_time_s=[row["sb3_wall_s"]], curve=False,
                      eval_episodes=episodes,
                      final_eval=row["sb3_return"], final_eval_episodes=episodes, budget_env_steps=steps,
                      library="stable-baselines3", source=source,
                      settings={"algorithm": "dqn", "precision": "fp32", "flush_denormal": False, "overrides": [],
                                "resumed": False, "machine": machine_description()})
            for row in rows if row["sb3_return"] is not None]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="breakout", choices=["asterix", "breakout", "freeway", "seaquest",
                                                                "spaceinvaders"])
    parser.add_argument("--steps", type=int, default=500_000, help="env steps per run (the preset's budget)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--episodes", type=int, default=100, help="greedy games per final network")
    parser.add_argument("--jobs", type=int, default=1, help="seeds trained at a time, in separate processes")
    parser.add_argument("--out", type=Path, default=None, help="where rlpipe's runs go (a temp dir if unset)")
    parser.add_argument("--quick", action="store_true", help="a tiny run (smoke test): 200 steps after the warm-up")
    parser.add_argument("--libraries", default="rlpipe,sb3", help="which to train: rlpipe, sb3 or both (default)")
    parser.add_argument("--results", type=Path, default=None,
                        help="append SB3's runs to this results file, for rlpipe report beside rlpipe's sweeps")
    args = parser.parse_args()
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    if args.quick:
        args.steps, args.seeds, args.episodes = 5_200, [0], 2  # the presets collect 5,000 random steps first
    torch.set_num_threads(1)
    out = args.out or Path(tempfile.mkdtemp(prefix="rlpipe-minatar-bench-"))

    libraries = tuple(lib for lib in args.libraries.split(",") if lib)
    if not libraries or set(libraries) - set(TRAINERS):
        parser.error(f"--libraries: choose from {', '.join(TRAINERS)}, got {args.libraries!r}")
    if "sb3" in libraries and not peer_installed("stable_baselines3"):
        libraries = tuple(lib for lib in libraries if lib != "sb3")
    compare = functools.partial(compare_seed, args.game, args.steps, args.episodes, out, libraries)
    sb3_first = [position % 2 == 1 for position in range(len(args.seeds))]
    rows: list[dict[str, float | None]] = []

    def keep(finished: Iterable[dict[str, float | None]]) -> None:
        """Each seed's row as it finishes, its SB3 run written to ``--results`` at once (a kill keeps it)."""
        for row in finished:
            rows.append(row)
            if args.results is not None:
                write_results(args.results, sb3_results(args.game, args.steps, args.episodes, [row]))

    if args.jobs > 1:
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            keep(pool.map(compare, args.seeds, sb3_first))
    else:
        keep(map(compare, args.seeds, sb3_first))

    def mean(key: str) -> float | None:
        values = [row[key] for row in rows if row[key] is not None]  # SB3's are None where it was skipped
        return statistics.fmean(values) if values else None

    ours_return, sb3_return = mean("rlpipe_return"), mean("sb3_return")
    ours_wall, sb3_wall = mean("rlpipe_wall_s"), mean("sb3_wall_s")
    wall_ratio = return_ratio = None
    if ours_wall is not None and sb3_wall is not None and ours_return is not None and sb3_return is not None:
        wall_ratio = sb3_wall / ours_wall
        return_ratio = ours_return / sb3_return if sb3_return else None  # None: SB3's return is 0
    figures = {
        "game": args.game, "steps": args.steps, "seeds": args.seeds, "episodes": args.episodes,
        "rlpipe_return_mean": ours_return, "sb3_return_mean": sb3_return,
        "rlpipe_wall_s_mean": ours_wall, "sb3_wall_s_mean": sb3_wall,
        "wall_time_sb3_ratio": wall_ratio, "return_sb3_ratio": return_ratio,
    }
    if wall_ratio is None:
        print(f"rlpipe {ours_return} / SB3 {sb3_return} mean final return: one library only, no ratio")
    else:
        print(f"rlpipe {ours_return:.2f} vs SB3 {sb3_return:.2f} mean final return; "
              f"SB3 took {figures['wall_time_sb3_ratio']:.2f}x rlpipe's wall time")
        if not sb3_return:
            print("return_sb3_ratio is null: SB3's mean final return is 0")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
