"""Offline returns beside d3rlpy: d3rlpy's TD3+BC and IQL trained on an rlpipe dataset, as run results.

The issue's side-by-side: the same dataset, the same settings and the same number of updates given
to d3rlpy 2.8.1, each run's final policy evaluated on the dataset's env, and the results written in
rlpipe's result format (``--results FILE``), so that ``rlpipe report`` puts d3rlpy's runs in the
same table as rlpipe's (``rlpipe sweep hopper-medium-td3bc hopper-medium-iql offline.dataset=DIR``).

* **Data.** The dataset's whole episodes (:meth:`rlpipe.data.dataset.Dataset.episodes`: the seal and
  every file checked) become d3rlpy's ``MDPDataset``, each episode's rows contiguous, its last row
  terminal if the env terminated there and a timeout otherwise. d3rlpy takes a row's next
  observation from the next row and leaves out the last row of a timed-out episode (one in 1,000 on
  Hopper); rows of episodes the data holds only part of (a replay buffer's first and last ones) are
  left out as well.
* **Settings**, read from the rlpipe config each algorithm is compared with (``--td3bc-config``,
  ``--iql-config``; default the ``hopper-medium-*`` presets): batch, learning rates, hidden sizes,
  discount, ``target_theta`` (d3rlpy's ``tau``), TD3+BC's smoothing noise, actor delay and alpha,
  IQL's expectile and temperature (d3rlpy's ``weight_temp``; both clip weights at 100). Where rlpipe
  normalises observations (``model.obs_norm``, running statistics of the batches) d3rlpy gets
  ``StandardObservationScaler`` (the dataset's mean and std); where the config scales rewards by the
  returns' range (``offline.return_range``) d3rlpy gets ``ReturnBasedRewardScaler`` with that multiplier.
  d3rlpy's defaults otherwise (no learning-rate schedule on either side).
* **Evaluation**: every ``--eval-every`` updates ``--eval-episodes`` greedy episodes (``predict``), and
  the final policy ``--final-episodes`` episodes, on ``gymnasium.make(env_id)``, episode ``i`` reset
  with seed ``10_000 * (seed + 1) + i``; actions in ``[-1, 1]`` are mapped onto the env's bounds, as
  rlpipe's env wrappers do.

d3rlpy pins gymnasium 1.0.0, so it runs in a virtualenv of its own (``--d3rlpy-python``; MuJoCo
tasks need ``mujoco`` there too, at rlpipe's version, so both sides step the same physics): each run
is a worker process of that interpreter, one torch thread. ``--against FILE`` (rlpipe's results of
the same task) adds ``<algo>_score_d3rlpy_ratio``: rlpipe's mean final score over d3rlpy's, normalised
by the dataset's reference returns where its manifest has them (> 1: rlpipe's runs end higher; null
where a score is not above 0). The intervals and the probability of improvement are the report's.
Without the interpreter one line says so and the figures are null.

Usage: ``python benchmarks/offline_returns.py DATASET [--algos td3bc iql] [--seeds 0 1 2]
[--updates 200000] [--eval-every 5000] [--eval-episodes 10] [--final-episodes 100] [--results FILE]
[--against FILE] [--d3rlpy-python PATH|none] [--quick]``. A full Hopper run (3 seeds, 200k updates,
both algorithms) is about 2 CPU-hours. The last line printed is JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from peers import D3RLPY_PYTHON, d3rlpy_python  # benchmarks/peers.py

# Only numpy at module level: d3rlpy's interpreter runs this file too (as the worker), without rlpipe.

ALGOS = {"td3bc": "hopper-medium-td3bc", "iql": "hopper-medium-iql"}
"""Name -> the rlpipe config compared with by default."""
COLUMN_FILES = ("observations", "actions", "rewards", "terminals", "timeouts")
EVAL_SEED_STRIDE = 10_000


# ---- d3rlpy's side (in its own interpreter) ------------------------------------------------
def evaluate(algo: Any, env: Any, episodes: int, first_seed: int) -> float:
    """Mean return of ``episodes`` greedy episodes, episode ``i`` reset with seed ``first_seed + i``."""
    low, high = env.action_space.low, env.action_space.high
    returns = []
    for i in range(episodes):
        obs, _ = env.reset(seed=first_seed + i)
        total, done = 0.0, False
        while not done:
            action = np.clip(algo.predict(np.asarray(obs, dtype=np.float32)[None])[0], -1.0, 1.0)
            obs, reward, terminated, truncated, _ = env.step(low + (action + 1.0) * (high - low) / 2)
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    return float(np.mean(returns))


def d3rlpy_config(job: dict[str, Any]) -> Any:
    """d3rlpy's config of ``job['algo']`` with the settings the parent read from rlpipe's config."""
    from d3rlpy.algos import IQLConfig, TD3PlusBCConfig
    from d3rlpy.models.encoders import VectorEncoderFactory
    from d3rlpy.preprocessing import ReturnBasedRewardScaler, StandardObservationScaler

    s = job["settings"]
    encoder = VectorEncoderFactory(hidden_units=s["hidden"])
    common = {"batch_size": s["batch_size"], "gamma": s["gamma"], "tau": s["tau"],
              "actor_learning_rate": s["actor_lr"], "critic_learning_rate": s["critic_lr"],
              "actor_encoder_factory": encoder, "critic_encoder_factory": encoder,
              "observation_scaler": StandardObservationScaler() if s["obs_norm"] else None,
              "reward_scaler": ReturnBasedRewardScaler(multiplier=s["return_range"]) if s["return_range"] else None}
    if job["algo"] == "td3bc":
        return TD3PlusBCConfig(**common, alpha=s["bc_alpha"], target_smoothing_sigma=s["noise_sigma"],
                               target_smoothing_clip=s["noise_clip"], update_actor_interval=s["actor_update_freq"])
    return IQLConfig(**common, value_encoder_factory=encoder, expectile=s["expectile"], weight_temp=s["temperature"])


def d3rlpy_worker(job_file: str) -> None:
    """Train and evaluate one d3rlpy run as the job file says; its curve goes to the job's ``out`` file."""
    import d3rlpy
    import gymnasium as gym
    import torch
    from d3rlpy.constants import ActionSpace
    from d3rlpy.logging import NoopAdapterFactory

    job = json.loads(Path(job_file).read_text())
    torch.set_num_threads(1)
    d3rlpy.seed(job["seed"])
    arrays = {name: np.load(Path(job["arrays"]) / f"{name}.npy") for name in COLUMN_FILES}
    dataset = d3rlpy.dataset.MDPDataset(**arrays, action_space=ActionSpace.CONTINUOUS)
    algo = d3rlpy_config(job).create(device=False)
    env = gym.make(job["env_id"])
    first_seed = EVAL_SEED_STRIDE * (job["seed"] + 1)
    curve: list[tuple[int, float, float]] = []
    start = time.perf_counter()

    def on_epoch(algo: Any, epoch: int, step: int) -> None:
        curve.append((step, evaluate(algo, env, job["eval_episodes"], first_seed), time.perf_counter() - start))

    algo.fit(dataset, n_steps=job["updates"], n_steps_per_epoch=job["eval_every"], show_progress=False,
             logger_adapter=NoopAdapterFactory(), save_interval=job["updates"] + 1, epoch_callback=on_epoch)
    torch.set_num_threads(1)
    final = evaluate(algo, env, job["final_episodes"], first_seed)
    Path(job["out"]).write_text(json.dumps({"curve": curve, "final": final, "d3rlpy": d3rlpy.__version__}))


# ---- the parent (rlpipe's interpreter) -----------------------------------------------------
def write_arrays(dataset: Any, folder: Path) -> int:
    """The dataset's whole episodes as d3rlpy's ``MDPDataset`` arrays in ``folder``; their row count."""
    from rlpipe.data.dataset import DatasetError

    if len(dataset.observation_space.shape or ()) != 1:
        raise DatasetError(f"dataset {dataset.path}: d3rlpy's side takes vector observations, not "
                           f"{dataset.observation_space}")
    rows = dataset.episodes().rows
    if not rows:
        raise DatasetError(f"dataset {dataset.path} holds no whole episode")
    order = np.concatenate(rows)
    ends = np.cumsum([len(r) for r in rows]) - 1
    c = dataset.columns
    terminals = np.zeros(len(order), dtype=np.float32)
    terminals[ends] = np.asarray(c["terminated"])[order[ends]]
    arrays = {"observations": np.asarray(c["obs"])[order], "actions": np.asarray(c["action"])[order],
              "rewards": np.asarray(c["reward"], dtype=np.float32)[order], "terminals": terminals,
              "timeouts": np.zeros(len(order), dtype=np.float32)}
    arrays["timeouts"][ends] = 1.0 - terminals[ends]
    for name, array in arrays.items():
        np.save(folder / f"{name}.npy", array)
    return len(order)


def settings_of(config: str, dataset: str) -> dict[str, Any]:
    """What d3rlpy's config takes from the rlpipe config ``config`` (a preset name or a YAML file)."""
    from rlpipe.config import load_config
    from rlpipe.config.loader import ConfigError

    cfg = load_config(config, [f"offline.dataset={dataset}"])
    assert cfg.offline is not None  # the override made it
    learn, model = cfg.policy.learn, cfg.policy.model
    lr = {key: getattr(learn, key) for key in ("learning_rate_actor", "learning_rate_q")}
    if not all(isinstance(value, float) for value in lr.values()):
        raise ConfigError(f"{config}: d3rlpy's side takes constant learning rates, got {lr}")
    return {"type": cfg.policy.type, "batch_size": learn.batch_size, "gamma": cfg.policy.discount_factor,
            "tau": learn.target_theta, "actor_lr": lr["learning_rate_actor"], "critic_lr": lr["learning_rate_q"],
            "hidden": list(model.encoder_hidden_size_list), "obs_norm": bool(model.obs_norm),
            "return_range": cfg.offline.return_range, "bc_alpha": getattr(learn, "bc_alpha", None),
            "noise_sigma": getattr(learn, "noise_sigma", None), "noise_clip": getattr(learn, "noise_clip", None),
            "actor_update_freq": getattr(learn, "actor_update_freq", None),
            "expectile": getattr(learn, "expectile", None), "temperature": getattr(learn, "temperature", None)}


def run_d3rlpy(python: str, job: dict[str, Any], folder: Path) -> dict[str, Any]:
    """One d3rlpy run in a worker of ``python``; what it wrote. RuntimeError with its output's tail if it failed."""
    job_file = folder / f"job-{job['algo']}-{job['seed']}.json"
    job_file.write_text(json.dumps(job))
    done = subprocess.run([python, str(Path(__file__).resolve()), "--d3rlpy-worker", str(job_file)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"the d3rlpy worker for {job['algo']} seed {job['seed']} exited with {done.returncode}:\n"
                           f"{done.stderr[-2000:]}")
    return json.loads(Path(job["out"]).read_text())


def result_of(job: dict[str, Any], output: dict[str, Any], task: str) -> Any:
    """The run result of one d3rlpy run (updates counted as ``train_iter``, as rlpipe's offline runs)."""
    from rlpipe.tools.results import RunResult
    from rlpipe.utils.provenance import machine_description

    steps, values, walls = zip(*output["curve"], strict=True) if output["curve"] else ((), (), ())
    return RunResult(
        group=f"d3rlpy-{job['algo']}", task=task, seed=job["seed"], env_step=[int(s) for s in steps],
        value=[float(v) for v in values], wall_time_s=[float(w) for w in walls], eval_episodes=job["eval_episodes"],
        final_eval=output["final"], final_eval_episodes=job["final_episodes"], budget_env_steps=job["updates"],
        counter="train_iter", library="d3rlpy",
        settings={"algorithm": job["settings"]["type"], "precision": "fp32", "flush_denormal": False,
                  "overrides": [f"compared with {job['config']}"], "resumed": False, "machine": machine_description()},
        source=f"d3rlpy {output['d3rlpy']}")


def rlpipe_finals(path: Path | None, task: str) -> dict[str, list[float]]:
    """rlpipe's final figures of ``task`` in the results file ``path``, by policy type."""
    from rlpipe.tools.results import read_results

    finals: dict[str, list[float]] = {}
    for result in read_results(path) if path is not None else []:
        if result.library == "rlpipe" and result.task == task:
            finals.setdefault(str(result.settings.get("algorithm")), []).append(result.final)
    return finals


def score_ratio(ours: float | None, theirs: float | None, reference: dict[str, float] | None) -> float | None:
    """rlpipe's mean final score over d3rlpy's, both normalised by the dataset's reference returns
    (``(return - random) / (expert - random)``, D4RL's score) where it has them; None where a side is
    missing or a score is not above 0 (a ratio of such scores does not rank them)."""
    if ours is None or theirs is None:
        return None
    if reference:
        span = reference["expert"] - reference["random"]
        ours, theirs = (ours - reference["random"]) / span, (theirs - reference["random"]) / span
    return ours / theirs if ours > 0 and theirs > 0 else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", nargs="?", help="an rlpipe dataset of vector observations")
    parser.add_argument("--algos", nargs="+", default=list(ALGOS), choices=list(ALGOS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--updates", type=int, default=200_000)
    parser.add_argument("--eval-every", type=int, default=5_000)
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--final-episodes", type=int, default=100)
    for name, preset in ALGOS.items():
        parser.add_argument(f"--{name}-config", default=preset,
                            help=f"the rlpipe config compared with (default {preset})")
    parser.add_argument("--results", type=Path, default=None, help="append d3rlpy's run results to this file")
    parser.add_argument("--against", type=Path, default=None, help="rlpipe's results of the task, for the ratios")
    parser.add_argument("--d3rlpy-python", default=D3RLPY_PYTHON,
                        help=f"the interpreter of d3rlpy's own virtualenv, or 'none' (default {D3RLPY_PYTHON})")
    parser.add_argument("--quick", action="store_true", help="a tiny run (smoke test): 200 updates, 2 episodes")
    parser.add_argument("--d3rlpy-worker", metavar="JOB", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.d3rlpy_worker:
        d3rlpy_worker(args.d3rlpy_worker)
        return
    if args.dataset is None:
        parser.error("the dataset is required")
    if args.quick:
        args.seeds, args.updates, args.eval_every, args.eval_episodes, args.final_episodes = [0], 200, 100, 1, 2
    from rlpipe.errors import RlpipeError, first_line

    try:
        compare(args)
    except RlpipeError as err:  # a tampered or missing dataset, a config that cannot be mapped: one line
        parser.error(first_line(err))


def compare(args: argparse.Namespace) -> None:
    """Train d3rlpy's side as ``args`` say, write its results, and print the figures' JSON line."""
    from rlpipe.data.dataset import Dataset
    from rlpipe.tools.results import write_results

    dataset = Dataset.open(args.dataset)
    python = d3rlpy_python(args.d3rlpy_python)
    ours = rlpipe_finals(args.against, dataset.env_id)
    reference = dataset.manifest.get("reference_returns")
    figures: dict[str, Any] = {"task": dataset.env_id, "updates": args.updates, "seeds": len(args.seeds)}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        rows = write_arrays(dataset, folder) if python else 0
        if python:
            print(f"{dataset.env_id}: {rows} rows of whole episodes to d3rlpy ({python})")
        for algo in args.algos:
            config = getattr(args, f"{algo}_config")
            settings = settings_of(config, args.dataset)
            finals = []
            for seed in args.seeds if python else []:
                job = {"algo": algo, "seed": seed, "settings": settings, "config": config, "env_id": dataset.env_id,
                       "arrays": str(folder), "updates": args.updates, "eval_every": args.eval_every,
                       "eval_episodes": args.eval_episodes, "final_episodes": args.final_episodes,
                       "out": str(folder / f"out-{algo}-{seed}.json")}
                output = run_d3rlpy(str(python), job, folder)
                finals.append(output["final"])
                print(f"d3rlpy {algo} seed {seed}: final {output['final']:.1f} ({args.final_episodes} episodes)",
                      flush=True)
                if args.results is not None:
                    write_results(args.results, [result_of(job, output, dataset.env_id)])
            rlpipe_runs = ours.get(settings["type"])
            d3_mean = statistics.fmean(finals) if finals else None
            rl_mean = statistics.fmean(rlpipe_runs) if rlpipe_runs else None
            figures[f"d3rlpy_{algo}_final_mean"] = d3_mean
            figures[f"rlpipe_{algo}_final_mean"] = rl_mean
            figures[f"{algo}_score_d3rlpy_ratio"] = score_ratio(rl_mean, d3_mean, reference)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
