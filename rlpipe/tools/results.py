"""Run results: one JSON record per finished run, what ``rlpipe sweep`` writes and ``rlpipe report`` reads.

A record holds what a report needs: the run's group (the rows of a table), task, seed and library;
its evaluation curve (env step, figure, wall time); its budget and threshold; and the settings a
reader must know to trust a figure (precision, ``flush_denormal``, overrides, whether it was
resumed, the machine, the commit). A results file is JSON lines, one record each, small enough to
commit beside the docs (no checkpoints). Records of rlpipe runs are read from a run directory
(:func:`result_of_run`); runs of other libraries enter through :mod:`rlpipe.tools.foreign`.
"""
from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rlpipe.errors import RlpipeError, first_line
from rlpipe.utils.metrics import read_metrics
from rlpipe.utils.provenance import code_version

RESULTS_FILE = "results.jsonl"
"""The name of a sweep's results file (and of the files committed under ``docs/results/``)."""


class ResultError(RlpipeError, ValueError):
    """A run or results file that cannot be read as results; the message names the file."""


@dataclass
class RunResult:
    """One run's evaluations and what produced them."""

    group: str
    """What the run is an instance of: a table row (``cartpole-dqn``, ``sb3-dqn``)."""
    task: str
    """The env id the run trained on; aggregates across tasks stratify by it."""
    seed: int
    env_step: list[int]
    """Env steps at which the run evaluated, increasing."""
    value: list[float]
    """The evaluation figure at each of those steps (the mean return, or the success rate)."""
    wall_time_s: list[float | None] = field(default_factory=list)
    """Wall time since the run's start at each evaluation (None where the run did not log it)."""
    eval_episodes: int | None = None
    """Episodes behind each figure of ``value``."""
    final_eval: float | None = None
    """A separate evaluation of the final policy (``rlpipe sweep --final-episodes``, Atari-100k's 100
    episodes), which stands for the run's final figure when given."""
    final_eval_episodes: int | None = None
    metric: str = "return"
    budget_env_steps: int | None = None
    threshold: float | None = None
    """The figure the run counted as solving its task (rlpipe: ``env.stop_value``), if any."""
    counter: str = "env_step"
    """What ``env_step`` and ``budget_env_steps`` count: env steps, or updates (``train_iter``) for a run
    that learns from a dataset alone."""
    curve: bool = True
    """Whether ``value`` holds evaluations made while the run trained. False for a run known by its final
    figure alone (a peer library's run that did not evaluate as it trained): one entry, at its end, and
    no best evaluation, no env steps to a threshold and no curve to report."""
    library: str = "rlpipe"
    settings: dict[str, Any] = field(default_factory=dict)
    """What changes a figure: ``algorithm``, ``precision``, ``flush_denormal``, ``overrides``, ``resumed``,
    ``machine`` (:func:`~rlpipe.utils.provenance.machine_description`; absent or None where not recorded), ..."""
    source: str = ""
    """The commit (or version) of the code that ran."""

    @property
    def final(self) -> float:
        """The final figure: the separate evaluation of the final policy if there is one, else the last evaluation."""
        return self.final_eval if self.final_eval is not None else self.value[-1]

    @property
    def best(self) -> float | None:
        """The best evaluation made while training; None for a run without a curve."""
        return max(self.value) if self.curve else None

    def first_reaching(self, threshold: float) -> tuple[int, float | None] | None:
        """``(env step, wall time)`` of the first evaluation at or above ``threshold``; None if none (or
        without a curve: check :attr:`curve` to tell the two apart)."""
        if not self.curve:
            return None
        for i, value in enumerate(self.value):
            if value >= threshold:
                return self.env_step[i], self.wall_time_s[i] if i < len(self.wall_time_s) else None
        return None

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any], origin: str) -> RunResult:
        """A record from its JSON object; a one-line :class:`ResultError` naming ``origin`` when keys
        are missing, unknown or of the wrong kind."""
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise ResultError(f"{origin}: unknown key '{unknown[0]}' in a run result")
        try:
            result = cls(**data)
        except TypeError as err:
            raise ResultError(f"{origin}: not a run result ({first_line(err)})") from None
        if not result.value or len(result.value) != len(result.env_step):
            raise ResultError(f"{origin}: run result '{result.group}' seed {result.seed} needs as many env_step "
                              "as value entries, at least one")
        if not isinstance(result.curve, bool):
            raise ResultError(f"{origin}: run result '{result.group}' seed {result.seed} has curve "
                              f"{result.curve!r}, not true or false")
        if not result.curve and len(result.value) != 1:
            raise ResultError(f"{origin}: run result '{result.group}' seed {result.seed} has no curve (curve: "
                              f"false), so it needs exactly one value, its final figure; it has {len(result.value)}")
        if any(not isinstance(v, (int, float)) or isinstance(v, bool) for v in result.value):
            raise ResultError(f"{origin}: run result '{result.group}' seed {result.seed} has a value that is not a "
                              "number")
        return result


def write_results(path: Path, results: Iterable[RunResult], append: bool = True) -> None:
    """Add ``results`` to the JSON-lines file ``path`` (one flushed line each, so a kill loses no
    finished record); ``append=False`` writes the file anew."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a" if append else "w") as file:
        for result in results:
            file.write(result.to_json() + "\n")
            file.flush()


def read_results(path: Path) -> list[RunResult]:
    """The records of a results file; a one-line :class:`ResultError` naming the file and line of a
    damaged one (a half-written last line, from a kill, is left out)."""
    lines = path.read_text().splitlines()
    results = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except ValueError:
            if number == len(lines):  # the write a kill interrupted
                break
            raise ResultError(f"{path}:{number}: not JSON") from None
        if not isinstance(data, dict):
            raise ResultError(f"{path}:{number}: not a JSON object")
        results.append(RunResult.from_dict(data, f"{path}:{number}"))
    return results


def collect_results(paths: Sequence[Path]) -> list[RunResult]:
    """The runs under ``paths``: results files, run directories (with ``metrics.jsonl`` and
    ``config.yaml``) and folders holding either (a sweep directory, ``docs/results``), searched
    recursively. A run directory that a results file beside it already holds is read once."""
    results: list[RunResult] = []
    for path in paths:
        path = Path(path)
        if path.is_file():
            results += read_results(path)
        elif (path / "metrics.jsonl").is_file():
            results.append(result_of_run(path))
        elif path.is_dir():
            files = sorted(path.rglob("*.jsonl"))
            found = [f for f in files if f.name != "metrics.jsonl"]
            for file in found:
                results += read_results(file)
            if not found:
                results += [result_of_run(f.parent) for f in files if (f.parent / "config.yaml").is_file()]
        else:
            raise ResultError(f"{path}: no such results file or run directory")
    if not results:
        raise ResultError(f"no run results under {', '.join(map(str, paths))}")
    return results


def evaluation_curve(records: Iterable[dict[str, Any]], key: str,
                     counter: str = "env_step") -> tuple[list[int], list[float], list[float | None]]:
    """``(steps, figures, wall times)`` of the evaluation records holding ``key``, with steps (the
    records' ``counter``: env steps, or updates) increasing: a resumed run goes back to its
    checkpoint and logs the evaluations after it again, and its later records stand."""
    latest: dict[int, tuple[float, float | None]] = {}
    for record in records:
        if record.get("kind") == "eval" and key in record:
            step = int(record[counter])
            for later in [s for s in latest if s > step]:  # what the resumed run did again
                del latest[later]
            latest[step] = (float(record[key]), record.get("wall_time_s"))
    steps = sorted(latest)
    return steps, [latest[s][0] for s in steps], [latest[s][1] for s in steps]


def result_of_run(run_dir: Path, group: str | None = None, overrides: Sequence[str] = (),
                  resumed: bool = False, final_eval: Mapping[str, Any] | None = None) -> RunResult:
    """The record of the rlpipe run in ``run_dir`` (its ``config.yaml``, ``metrics.jsonl`` and
    ``summary.json``); ``group`` defaults to the config's ``exp_name``; ``overrides`` and ``resumed``
    (whether it was resumed) go into its settings; ``final_eval`` is what ``rlpipe eval`` printed for
    its final checkpoint, if that was run."""
    config_path = run_dir / "config.yaml"
    if not config_path.is_file():
        raise ResultError(f"{run_dir} is not a run directory (no config.yaml)")
    cfg = yaml.safe_load(config_path.read_text()) or {}
    summary_path = run_dir / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.is_file() else {}
    metric = summary.get("eval_metric", cfg.get("env", {}).get("eval_metric", "return"))
    try:
        records = read_metrics(run_dir)
    except ValueError as err:
        raise ResultError(f"{run_dir / 'metrics.jsonl'} is damaged ({first_line(err)})") from None
    key = "success_rate" if metric == "success_rate" else "return_mean"
    policy, run, env = cfg.get("policy", {}), cfg.get("run", {}), cfg.get("env", {})
    offline = cfg.get("offline") or {}
    counter = "train_iter" if offline and offline.get("dataset_share", 1.0) >= 1.0 else "env_step"
    steps, values, times = evaluation_curve(records, key, counter)
    if not steps:
        raise ResultError(f"{run_dir} has no evaluation in its metrics.jsonl")
    stop_value = env.get("stop_value")
    settings = {
        "algorithm": _algorithm_of(policy),
        "precision": policy.get("learn", {}).get("precision", "fp32"),
        "flush_denormal": run.get("flush_denormal"),
        "overrides": list(overrides),
        "resumed": resumed,
        "machine": summary.get("machine"),  # None: a run from before runs recorded it
        **({"dataset": offline["dataset"], "dataset_share": offline.get("dataset_share", 1.0)} if offline else {}),
    }
    return RunResult(
        group=group or str(cfg.get("exp_name", run_dir.name)), task=str(env.get("env_id")),
        seed=int(cfg.get("seed", 0)),
        env_step=steps, value=values, wall_time_s=times, eval_episodes=env.get("n_evaluator_episode"),
        final_eval=None if final_eval is None else float(final_eval[key]),
        final_eval_episodes=None if final_eval is None else int(final_eval["episodes"]),
        metric=metric, budget_env_steps=run.get("max_train_iter" if counter == "train_iter" else "max_env_step"),
        counter=counter,
        threshold=float(stop_value) if stop_value is not None and math.isfinite(stop_value) else None,
        settings=settings, source=summary.get("code") or code_version(),  # older runs recorded none
    )


def _algorithm_of(policy: dict[str, Any]) -> str | None:
    """The policy type, with ``+ cql`` for a Q-learning type under CQL's penalty (``learn.cql_alpha``)."""
    kind = policy.get("type")
    conservative = kind != "cql" and (policy.get("learn", {}).get("cql_alpha") or 0) > 0
    return f"{kind} + cql" if conservative else kind
