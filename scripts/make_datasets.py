"""Make the offline datasets the offline presets name, the way D4RL made its own, from one seed.

    python scripts/make_datasets.py hopper [--seed 0] [--out datasets] [--runs runs/datasets]
    python scripts/make_datasets.py halfcheetah
    python scripts/make_datasets.py minatar-breakout          (any MinAtar game)
    python scripts/make_datasets.py pendulum --scale 0.05     (a small one, minutes)

MuJoCo (``hopper``, ``halfcheetah``; the ``mujoco`` extra), writing ``<out>/<env>-<kind>``:
    random         uniformly random play; its mean return is the normalised score's 0
    expert         the best-evaluated policy of a full ``<env>-sac`` run (policy.nstep=1; the
                   checkpoint ``rlpipe.load`` takes: Hopper SAC's late evaluations swing between
                   about 1,000 and 3,000, so its final one may be a poor expert), its actions
                   sampled as it explores; their mean return (over the whole dataset's episodes,
                   not the evaluation that chose it) is the normalised score's 100
    medium         a second SAC run of the same preset, stopped at its first evaluation at or
                   above a third of the expert's return, its policy there played the same way
    medium-replay  that run's replay buffer when it stopped
    medium-expert  medium and expert, half and half
Each holds about ``--scale`` x 1M transitions (D4RL's size), except ``medium-replay``, which
holds what the medium run collected. Every manifest carries the random and expert returns.

MinAtar (``minatar-<game>``): ``<out>/minatar-<game>-replay`` is the replay buffer (the last
100k transitions) of a full ``minatar-<game>-dqn`` run, with the random return and that run's
final policy's (greedy, 100 episodes) as the references.

Runs are deterministic for a seed on one machine, so the datasets come out the same bit for bit;
on a CPU with other vector instructions (AVX-512 or not) the float arithmetic of training, and so
the datasets, may differ. The runs are kept under ``--runs`` (an existing run there is resumed
or reused, not trained again).
"""
from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import Any

from rlpipe.data.dataset import Dataset
from rlpipe.entry.api import train
from rlpipe.entry.summary import run_has_ended
from rlpipe.framework.middleware import has_resume_point
from rlpipe.tools.datasets import copy_dataset, dataset_from_run, mix_datasets, rollout_dataset

D4RL_SIZE = 1_000_000
MUJOCO = {"hopper": ("hopper-sac", 1000), "halfcheetah": ("halfcheetah-sac", 1000), "pendulum": ("pendulum-sac", 200)}
"""Name -> (SAC preset, the env's episode length), for the number of episodes a dataset size needs."""


def _train(preset: str, run_dir: Path, overrides: list[str]) -> Path:
    """Train (or resume, or reuse) ``preset`` in ``run_dir``; returns it once it has ended. A run
    stopped by a signal ends the script: the datasets must not come from a run cut short."""
    if not run_has_ended(run_dir):
        summary = train(preset, run_dir, overrides=[*overrides, "run.progress=false"],
                        resume=has_resume_point(run_dir), announce=print).summary
        if summary.stopped_by is not None:
            raise SystemExit(f"make_datasets: {run_dir} was stopped by {summary.stopped_by} at env step "
                             f"{summary.env_step}; run the script again to resume it")
    return run_dir


def _mean_return(dataset: Dataset) -> float:
    return float(dataset.manifest["episodes"]["return_mean"])


def _report(dataset: Dataset) -> None:
    episodes = dataset.manifest["episodes"]
    print(json.dumps({"dataset": str(dataset.path), "size": dataset.size, "episodes": episodes["count"],
                      "return_mean": episodes.get("return_mean")}))


def _with_reference(measured: Dataset, out: Path, reference: dict[str, float]) -> Dataset:
    """``measured`` written to ``out`` with the reference returns in its manifest."""
    return copy_dataset(measured.path, out, reference, overwrite=True)


def make_mujoco(name: str, seed: int, out: Path, runs: Path, scale: float) -> None:
    preset, length = MUJOCO[name]
    episodes = max(1, round(scale * D4RL_SIZE / length))
    base = ["policy.nstep=1", f"seed={seed}"] + (["run.max_env_step=20000"] if name == "pendulum" else [])
    play: dict[str, Any] = {"seed": seed + 1, "overwrite": True}
    measuring = out / ".measuring"
    random_data = rollout_dataset(preset, measuring / f"{name}-random", episodes, random_actions=True, **play)
    expert_run = _train(preset, runs / f"{name}-expert", base)
    expert_data = rollout_dataset(expert_run, measuring / f"{name}-expert", episodes, sample=True, **play)
    reference = {"random": _mean_return(random_data), "expert": _mean_return(expert_data)}
    target = reference["random"] + (reference["expert"] - reference["random"]) / 3.0
    medium_run = _train(preset, runs / f"{name}-medium",
                        [*base, f"seed={seed + 100}", f"env.stop_value={target}", "run.stop_on_solve=true"])
    made = [
        _with_reference(random_data, out / f"{name}-random", reference),
        _with_reference(expert_data, out / f"{name}-expert", reference),
        rollout_dataset(medium_run, out / f"{name}-medium", episodes, sample=True, reference_returns=reference,
                        **play),
        dataset_from_run(medium_run, out / f"{name}-medium-replay", reference, overwrite=True),
    ]
    made.append(mix_datasets(made[2].path, made[1].path, 0.5, out / f"{name}-medium-expert", reference,
                             overwrite=True))
    shutil.rmtree(measuring)
    for dataset in made:
        _report(dataset)


def make_minatar(game: str, seed: int, out: Path, runs: Path) -> None:
    preset, measuring = f"minatar-{game}-dqn", out / ".measuring"
    random_data = rollout_dataset(preset, measuring / "random", 100, random_actions=True, seed=seed + 1,
                                  overwrite=True)
    run = _train(preset, runs / f"minatar-{game}-dqn", [f"seed={seed}"])
    final = rollout_dataset(run / "ckpt" / "final.pth.tar", measuring / "final", 100, seed=seed + 1, overwrite=True)
    reference = {"random": _mean_return(random_data), "expert": _mean_return(final)}
    shutil.rmtree(measuring)
    _report(dataset_from_run(run, out / f"minatar-{game}-replay", reference, overwrite=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("name", help="hopper, halfcheetah, pendulum, or minatar-<game>")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("datasets"))
    parser.add_argument("--runs", type=Path, default=Path("runs/datasets"))
    parser.add_argument("--scale", type=float, default=1.0, help="dataset size as a share of D4RL's 1M transitions")
    args = parser.parse_args()
    if args.name.startswith("minatar-"):
        make_minatar(args.name.removeprefix("minatar-"), args.seed, args.out, args.runs)
    elif args.name in MUJOCO:
        make_mujoco(args.name, args.seed, args.out, args.runs, args.scale)
    else:
        parser.error(f"unknown dataset family {args.name!r}: hopper, halfcheetah, pendulum or minatar-<game>")


if __name__ == "__main__":
    main()
