"""Runs of other libraries as run results, so side-by-sides go through the same ``rlpipe report``.

Stable-Baselines3: its ``EvalCallback(log_path=DIR)`` saves ``DIR/evaluations.npz`` (``timesteps``,
``results`` [evaluations, episodes], ``ep_lengths``, and ``successes`` for goal tasks), and its
``Monitor`` wrapper a ``monitor.csv`` of training episodes (return ``r``, length ``l``, seconds since
the start ``t``). ``rlpipe import-sb3 DIR --group G --task T --seed S --out FILE`` appends one
:class:`~rlpipe.tools.results.RunResult` to ``FILE``.
"""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from rlpipe.tools.results import ResultError, RunResult

SB3_EVALUATIONS = "evaluations.npz"


def result_of_sb3(log_dir: Path, group: str, task: str, seed: int, algorithm: str | None = None) -> RunResult:
    """The run result of an SB3 run whose ``EvalCallback`` logged to ``log_dir``.

    The evaluation figure is the mean return of each evaluation's episodes, or their success rate
    when the file has successes. Wall times come from the run's one ``monitor.csv`` (a single
    training env): the time at the end of the first training episode that ended at or after each
    evaluation's step, so they are a little late; with no such file (or one per env) they are not known.
    """
    path = log_dir / SB3_EVALUATIONS
    if not path.is_file():
        raise ResultError(f"{log_dir} has no {SB3_EVALUATIONS} (SB3's EvalCallback(log_path=...) writes it)")
    try:
        with np.load(path, allow_pickle=False) as data:
            steps, results = np.asarray(data["timesteps"]), np.asarray(data["results"], dtype=np.float64)
            successes = np.asarray(data["successes"], dtype=np.float64) if "successes" in data.files else None
    except (ValueError, KeyError, OSError) as err:
        raise ResultError(f"{path} is not an SB3 evaluations file ({str(err).splitlines()[0]})") from None
    if steps.ndim != 1 or results.ndim != 2 or len(steps) != len(results) or not len(steps):
        raise ResultError(f"{path}: timesteps [n] and results [n, episodes] do not match, or are empty")
    metric = "success_rate" if successes is not None and successes.size else "return"
    values = successes.mean(axis=1) if metric == "success_rate" and successes is not None else results.mean(axis=1)
    return RunResult(group=group, task=task, seed=seed, env_step=[int(s) for s in steps],
                     value=[float(v) for v in values], wall_time_s=_monitor_times(log_dir, steps),
                     eval_episodes=int(results.shape[1]), metric=metric, budget_env_steps=int(steps[-1]),
                     library="stable-baselines3", settings={"algorithm": algorithm}, source="stable-baselines3")


def _monitor_times(log_dir: Path, steps: np.ndarray) -> list[float | None]:
    """Seconds since the start at each of ``steps`` from the run's one ``monitor.csv`` (see
    :func:`result_of_sb3`); None for each when there is not exactly one file."""
    files = sorted(log_dir.glob("*monitor.csv"))
    if len(files) != 1:
        return [None] * len(steps)
    with files[0].open() as file:
        rows = list(csv.DictReader(line for line in file if not line.startswith("#")))
    ends = np.cumsum([int(row["l"]) for row in rows])
    times = [float(row["t"]) for row in rows]
    found = np.searchsorted(ends, steps, side="left")
    return [times[i] if i < len(times) else None for i in found]
