"""``rlpipe report``: what a set of runs shows, with its number of runs and 95% intervals.

Reads run results (:mod:`rlpipe.tools.results`: a sweep's ``results.jsonl``, run directories,
committed results files) and reports per **group** (a preset, or ``preset:label``) and task:

- the final evaluation's mean, median and interquartile mean (IQM) over runs, the best
  evaluation's mean, each with a 95% stratified bootstrap interval (:mod:`rlpipe.tools.stats`);
- with ``--baseline GROUP``, the probability that a run of the group beats a run of the baseline
  on the same task (P(X > Y), Agarwal et al. 2021);
- env steps and wall time until the first evaluation at or above the task's threshold (the
  preset's ``env.stop_value``, or ``--threshold``): the median with its interval and how many
  runs got there;
- with ``--wall-time``, the mean wall time of whole runs (each run's time at its last evaluation, or
  at the end of training for a run without a curve)
  and, with a baseline, the ratio of that mean to the baseline's, each with its interval (for a
  setting that changes speed, such as ``run.flush_denormal``; wall times are only comparable
  between runs made under the same load);
- with ``--normalise``, the same aggregates over tasks of normalised scores (each task's runs
  resampled on their own);
- the settings behind each group's figures (library, algorithm, precision, ``flush_denormal``,
  overrides, resumed runs, code and, where the runs recorded it, the machine), since a figure
  without them cannot be compared; a group whose runs differ in algorithm, precision,
  ``flush_denormal`` or overrides is refused;
- machines: a group may hold runs of several (a sweep on a Ray cluster of mixed nodes): its returns
  count as any other seeds do, but wall times are only given where every run compared ran on one
  machine ("other machines" in their place otherwise);
- curves: per task, each group's mean evaluation against env steps with its 95% band.

A run known by its final figure alone (``curve: false`` in its record: a peer library's run that
did not evaluate as it trained) counts in the final figures and whole-run wall times, and has no
best evaluation, threshold or curve ("no curve" in their place).

Output: markdown (printed), and with ``--out DIR`` also ``report.md``, ``report.json`` and
``curves.png``. The figures are seeded, so the same files give the same report.
"""
from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rlpipe.errors import MissingDependencyError
from rlpipe.tools import stats
from rlpipe.tools.normalisation import Normaliser, load_normaliser
from rlpipe.tools.report_options import ReportOptions
from rlpipe.tools.results import ResultError, RunResult, collect_results
from rlpipe.utils.plot import on_common_grid

NO_CURVE = "no curve"
"""What the report prints where a group's runs did not evaluate while they trained."""
OTHER_MACHINES = "other machines"
"""What the report prints for a wall time whose runs ran on more than one machine."""
NOT_RECORDED = "not recorded"
"""The machine of a run from before runs recorded theirs."""
INTERVAL_NOTE = (f"[low, high]: {stats.CONFIDENCE:.0%} stratified percentile-bootstrap interval "
                 f"({stats.RESAMPLES:,} resamples, scipy); IQM: mean of the middle 50% of runs (with under 4 "
                 "runs it trims nothing and equals the mean)")


@dataclass
class TaskRow:
    """One group on one task."""

    group: str
    task: str
    seeds: list[int]
    final: dict[str, stats.Estimate]
    best: stats.Estimate | None
    """None when a run has no curve (:attr:`~rlpipe.tools.results.RunResult.curve`)."""
    improvement: stats.Estimate | None = None
    curve: bool = True
    """Whether every run has evaluations made while it trained (else no best, threshold or curve)."""
    threshold: float | None = None
    reached: int = 0
    steps_to_threshold: stats.Estimate | None = None
    wall_to_threshold: stats.Estimate | None = None
    wall_time: stats.Estimate | None = None
    wall_time_ratio: stats.Estimate | None = None
    one_machine: bool = True
    """Whether the row's runs ran on one machine (else no wall times: they do not compare)."""
    baseline_one_machine: bool = True
    """Whether the baseline's runs on the task ran on the row's machine (else no wall-time ratio)."""


@dataclass
class AggregateRow:
    """One group over every task it ran, on normalised scores."""

    group: str
    tasks: int
    runs: int
    final: dict[str, stats.Estimate]
    improvement: stats.Estimate | None = None


@dataclass
class Report:
    rows: list[TaskRow]
    aggregates: list[AggregateRow]
    settings: dict[str, dict[str, Any]]
    baseline: str | None = None
    normalisation: str | None = None
    groups: dict[str, dict[str, list[RunResult]]] = field(default_factory=dict, repr=False)
    wall_time: bool = False

    def to_markdown(self) -> str:
        return "\n".join(_markdown(self)) + "\n"

    def to_json(self) -> dict[str, Any]:
        def estimates(values: dict[str, stats.Estimate]) -> dict[str, Any]:
            return {name: estimate.as_dict() for name, estimate in values.items()}

        def maybe(estimate: stats.Estimate | None) -> dict[str, Any] | None:
            return estimate.as_dict() if estimate is not None else None

        return {
            "baseline": self.baseline, "normalisation": self.normalisation,
            "confidence": stats.CONFIDENCE, "resamples": stats.RESAMPLES,
            "tasks": [{"group": r.group, "task": r.task, "seeds": r.seeds, "final": estimates(r.final),
                       "best_mean": maybe(r.best), "curve": r.curve,
                       "p_improvement": maybe(r.improvement),
                       "threshold": r.threshold, "reached": r.reached,
                       "env_steps_to_threshold": maybe(r.steps_to_threshold),
                       "wall_time_s_to_threshold": maybe(r.wall_to_threshold),
                       **({"wall_time_s": maybe(r.wall_time), "wall_time_ratio": maybe(r.wall_time_ratio)}
                          if self.wall_time else {})} for r in self.rows],
            "normalised": [{"group": a.group, "tasks": a.tasks, "runs": a.runs, "final": estimates(a.final),
                            "p_improvement": maybe(a.improvement)} for a in self.aggregates],
            "settings": self.settings,
        }

    def write(self, out: Path) -> list[Path]:
        """``report.md``, ``report.json`` and ``curves.png`` in ``out``; the paths written."""
        out.mkdir(parents=True, exist_ok=True)
        (out / "report.md").write_text(self.to_markdown())
        (out / "report.json").write_text(json.dumps(self.to_json(), indent=1) + "\n")
        return [out / "report.md", out / "report.json", plot_curves(self, out / "curves.png")]


def make_report(options: ReportOptions) -> Report:
    """Read the results :class:`ReportOptions` names and report them."""
    results = collect_results(options.paths)
    if options.groups:
        known = list(dict.fromkeys(result.group for result in results))
        missing = [group for group in options.groups if group not in known]
        if missing:
            raise ResultError(f"--group: no group '{missing[0]}' (groups: {', '.join(known)})")
        results = [result for result in results if result.group in options.groups]
    normaliser = load_normaliser(options.normalise) if options.normalise else None
    return build_report(results, options.baseline, normaliser, options.threshold, options.seed, options.wall_time)


def group_results(results: Sequence[RunResult]) -> dict[str, dict[str, list[RunResult]]]:
    """``{group: {task: [runs by seed]}}`` in the order groups first appear; a one-line
    :class:`ResultError` when a group holds one seed twice on a task, or runs of other settings."""
    groups: dict[str, dict[str, list[RunResult]]] = {}
    first: dict[str, RunResult] = {}
    for result in results:
        runs = groups.setdefault(result.group, {}).setdefault(result.task, [])
        if any(run.seed == result.seed for run in runs):
            raise ResultError(f"group '{result.group}' has seed {result.seed} on {result.task} twice: give each "
                              "results file once, or name one sweep's groups apart (rlpipe sweep --label)")
        reference = first.setdefault(result.group, result)
        for key in ("overrides", "precision", "flush_denormal", "algorithm"):
            if reference.settings.get(key) != result.settings.get(key):
                raise ResultError(f"group '{result.group}' mixes runs whose {key} differ "
                                  f"({reference.settings.get(key)!r} and {result.settings.get(key)!r}); name "
                                  "them apart with rlpipe sweep --label")
        runs.append(result)
    for tasks in groups.values():
        for runs in tasks.values():
            runs.sort(key=lambda run: run.seed)
    return groups


def _machines(runs: Sequence[RunResult]) -> list[str]:
    """The machines ``runs`` ran on, sorted ("not recorded" for a run from before runs recorded theirs)."""
    return sorted({run.settings.get("machine") or NOT_RECORDED for run in runs})


def _one_machine(*run_sets: Sequence[RunResult]) -> bool:
    """Whether every run of ``run_sets`` ran on one machine (or none recorded one): wall times compare."""
    return len(_machines([run for runs in run_sets for run in runs])) == 1


def build_report(results: Sequence[RunResult], baseline: str | None = None, normaliser: Normaliser | None = None,
                 threshold: float | None = None, seed: int = 0, wall_time: bool = False) -> Report:
    """The report of ``results`` (see the module's docstring); ``seed`` seeds every bootstrap."""
    groups = group_results(results)
    if baseline is not None and baseline not in groups:
        raise ResultError(f"--baseline: no group '{baseline}' (groups: {', '.join(groups)})")
    rows = [_task_row(group, task, runs, groups, baseline, threshold, seed)
            for group, tasks in groups.items() for task, runs in tasks.items()]
    if wall_time:
        for row in rows:
            _add_wall_time(row, groups, baseline, seed)
    aggregates = [_aggregate_row(group, tasks, groups, baseline, normaliser, seed)
                  for group, tasks in groups.items()] if normaliser is not None else []
    settings = {group: _settings(tasks) for group, tasks in groups.items()}
    return Report(rows, aggregates, settings, baseline, normaliser.name if normaliser else None, groups, wall_time)


def _finals(runs: Sequence[RunResult]) -> np.ndarray:
    return np.asarray([run.final for run in runs], dtype=np.float64)


def _task_row(group: str, task: str, runs: list[RunResult], groups: dict[str, dict[str, list[RunResult]]],
              baseline: str | None, threshold: float | None, seed: int) -> TaskRow:
    finals = _finals(runs)
    curve = all(run.curve for run in runs)
    row = TaskRow(group, task, [run.seed for run in runs],
                  {name: stats.bootstrap_estimate([finals], aggregate, seed)
                   for name, aggregate in stats.AGGREGATES.items()},
                  stats.bootstrap_estimate([np.asarray([run.best for run in runs])], stats.mean, seed) if curve
                  else None, curve=curve, one_machine=_one_machine(runs))
    other = groups.get(baseline or "", {}).get(task)
    if baseline is not None and group != baseline and other:
        row.improvement = stats.probability_of_improvement([finals], [_finals(other)], seed)
    goal = threshold if threshold is not None else runs[0].threshold
    row.threshold = goal
    if goal is not None and curve:
        reached = [run.first_reaching(goal) for run in runs]
        row.reached = sum(r is not None for r in reached)
        row.steps_to_threshold = stats.censored_median(np.asarray([r[0] if r else math.inf for r in reached]), seed)
        walls = [r[1] if r else math.inf for r in reached]
        if all(wall is not None for wall in walls) and row.one_machine:
            row.wall_to_threshold = stats.censored_median(np.asarray(walls, dtype=np.float64), seed)
    return row


def _whole_run_times(runs: Sequence[RunResult]) -> np.ndarray | None:
    """Each run's wall time at its last evaluation; None when a run did not log it."""
    times = [run.wall_time_s[-1] if run.wall_time_s else None for run in runs]
    return None if any(time is None for time in times) else np.asarray(times, dtype=np.float64)


def _ratio_of_means(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.asarray(np.mean(x, axis=axis) / np.mean(y, axis=axis))


def _add_wall_time(row: TaskRow, groups: dict[str, dict[str, list[RunResult]]], baseline: str | None,
                   seed: int) -> None:
    """``row``'s mean whole-run wall time and, against the baseline on the same task, the ratio of the means
    (each group's runs resampled on their own)."""
    runs = groups[row.group][row.task]
    times = _whole_run_times(runs)
    if times is None or not row.one_machine:
        return
    row.wall_time = stats.bootstrap_estimate([times], stats.mean, seed)
    other = groups.get(baseline or "", {}).get(row.task)
    base = _whole_run_times(other) if other and row.group != baseline else None
    row.baseline_one_machine = other is None or _one_machine(runs, other)
    if base is not None and row.baseline_one_machine:
        row.wall_time_ratio = stats.bootstrap_estimate([times, base], _ratio_of_means, seed)


def _aggregate_row(group: str, tasks: dict[str, list[RunResult]], groups: dict[str, dict[str, list[RunResult]]],
                   baseline: str | None, normaliser: Normaliser, seed: int) -> AggregateRow:
    strata = [np.asarray([normaliser(task, run.final) for run in runs]) for task, runs in tasks.items()]
    row = AggregateRow(group, len(tasks), sum(len(runs) for runs in tasks.values()),
                       {name: stats.bootstrap_estimate(strata, stats.pooled(aggregate), seed)
                        for name, aggregate in stats.AGGREGATES.items()})
    if baseline is not None and group != baseline:
        shared = [task for task in tasks if task in groups[baseline]]
        if shared:
            row.improvement = stats.probability_of_improvement(
                [_finals(tasks[t]) for t in shared], [_finals(groups[baseline][t]) for t in shared], seed)
    return row


def _settings(tasks: dict[str, list[RunResult]]) -> dict[str, Any]:
    runs = [run for task_runs in tasks.values() for run in task_runs]
    first = runs[0]
    if first.final_eval is not None:
        evaluation = f"final policy, {_episodes(first.final_eval_episodes)}"
    else:
        evaluation = f"last evaluation, {_episodes(first.eval_episodes)}" if first.eval_episodes else "last evaluation"
    return {
        "library": first.library, "algorithm": first.settings.get("algorithm"),
        "precision": first.settings.get("precision"), "flush_denormal": first.settings.get("flush_denormal"),
        "overrides": first.settings.get("overrides", []), "budget_env_steps": first.budget_env_steps,
        "budget_counts": "updates" if first.counter == "train_iter" else "",
        "final_figure": evaluation, "resumed": sum(bool(run.settings.get("resumed")) for run in runs),
        "runs": len(runs), "code": sorted({run.source for run in runs}), "machine": _machines(runs),
    }


def _episodes(count: int | None) -> str:
    return f"{count} episode{'' if count == 1 else 's'}"


def _number(value: float) -> str:
    if math.isinf(value):
        return "not reached" if value > 0 else "-inf"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def _estimate(estimate: stats.Estimate | None, unit: str = "") -> str:
    """``value unit [low, high]``; "not reached" stands for an infinite number of steps."""
    if estimate is None:
        return ""

    def number(value: float) -> str:
        return _number(value) + (unit if math.isfinite(value) else "")

    if estimate.low is None or estimate.high is None:
        return f"{number(estimate.value)} (no interval: 1 run)"
    if math.isinf(estimate.value) and estimate.low == estimate.value:
        return number(estimate.value)
    return f"{number(estimate.value)} [{number(estimate.low)}, {number(estimate.high)}]"


def _wall_time(estimate: stats.Estimate | None, one_machine: bool) -> str:
    """A wall-time cell: the estimate in seconds, else why there is none."""
    if estimate is not None:
        return _estimate(estimate, " s")
    return "not logged" if one_machine else OTHER_MACHINES


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return [f"| {' | '.join(header)} |", f"|{'---|' * len(header)}", *(f"| {' | '.join(row)} |" for row in rows)]


def _markdown(report: Report) -> list[str]:
    versus = [f"P(> {report.baseline})"] if report.baseline else []
    lines = ["Final evaluation (per task):", ""]
    lines += _table(["group", "task", "runs", "mean", "median", "IQM", "best, mean", *versus], [
        [r.group, r.task, str(len(r.seeds)), *(_estimate(r.final[name]) for name in stats.AGGREGATES),
         _estimate(r.best) if r.best is not None else NO_CURVE,
         *([_estimate(r.improvement)] if report.baseline else [])] for r in report.rows])
    reaching = [r for r in report.rows if r.threshold is not None]
    if reaching:
        lines += ["", "Reaching the threshold (the first evaluation at or above it; median over runs):", ""]
        lines += _table(["group", "task", "threshold", "reached", "env steps", "wall time"], [
            [r.group, r.task, _number(r.threshold or 0.0), f"{r.reached}/{len(r.seeds)}",
             _estimate(r.steps_to_threshold), _wall_time(r.wall_to_threshold, r.one_machine)]
            if r.curve else [r.group, r.task, _number(r.threshold or 0.0), NO_CURVE, "", ""] for r in reaching])
    if report.wall_time:
        versus_time = [f"against {report.baseline}"] if report.baseline else []
        lines += ["", "Whole runs (wall time to the last evaluation, or to the end of training without a curve; mean "
                  "over runs, and the ratio of means):", ""]
        lines += _table(["group", "task", "runs", "wall time", *versus_time], [
            [r.group, r.task, str(len(r.seeds)), _wall_time(r.wall_time, r.one_machine),
             *([_estimate(r.wall_time_ratio, "x") if r.one_machine and r.baseline_one_machine else OTHER_MACHINES]
               if report.baseline else [])] for r in report.rows])
    if report.aggregates:
        lines += ["", f"Normalised over tasks ({report.normalisation}; each task's runs resampled on their own):", ""]
        lines += _table(["group", "tasks", "runs", "mean", "median", "IQM", *versus], [
            [a.group, str(a.tasks), str(a.runs), *(_estimate(a.final[name]) for name in stats.AGGREGATES),
             *([_estimate(a.improvement)] if report.baseline else [])] for a in report.aggregates])
    # The machine column appears once a group's runs recorded theirs (older records did not).
    machines = any(s["machine"] != [NOT_RECORDED] for s in report.settings.values())
    lines += ["", "Settings:", ""]
    lines += _table(["group", "library", "algorithm", "final figure", "precision", "flush_denormal", "budget",
                     "resumed", "overrides", "code", *(["machine"] if machines else [])], [
        [group, s["library"], str(s["algorithm"]), s["final_figure"], str(s["precision"]), str(s["flush_denormal"]),
         f"{_number(s['budget_env_steps'])} {s['budget_counts']}".strip() if s["budget_env_steps"] else "",
         f"{s['resumed']}/{s['runs']}",
         " ".join(f"`{o}`" for o in s["overrides"]), ", ".join(s["code"]),
         *([" / ".join(s["machine"])] if machines else [])] for group, s in report.settings.items()])
    return [*lines, "", INTERVAL_NOTE]


def plot_curves(report: Report, out: Path) -> Path:
    """Per task a panel: each group's mean evaluation against env steps, with its 95% bootstrap band,
    on the env steps where all its runs have data (nothing is extrapolated)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise MissingDependencyError("rlpipe report's curves need matplotlib: pip install 'rlpipe[plot]'") from None
    tasks = list(dict.fromkeys(task for tasks in report.groups.values() for task in tasks))
    fig, axes = plt.subplots(1, len(tasks), figsize=(6 * len(tasks), 4), squeeze=False)
    for ax, task in zip(axes[0], tasks, strict=True):
        for group, group_tasks in report.groups.items():
            runs = [run for run in group_tasks.get(task, []) if run.curve]
            if not runs:
                continue
            grid, values = on_common_grid([(run.env_step, run.value) for run in runs])
            centre, low, high = stats.band(values)
            (line,) = ax.plot(grid, centre, label=f"{group} ({len(runs)} run{'s' if len(runs) > 1 else ''})")
            ax.fill_between(grid, low, high, color=line.get_color(), alpha=0.25, linewidth=0)
        ax.set_title(task)
        counters = {run.counter for runs in (tasks.get(task) for tasks in report.groups.values()) if runs
                    for run in runs}
        ax.set_xlabel("updates" if counters == {"train_iter"} else "env steps")
        metric = next(runs[0].metric for runs in (tasks.get(task) for tasks in report.groups.values()) if runs)
        ax.set_ylabel("success rate" if metric == "success_rate" else "mean evaluation return")
        ax.grid(alpha=0.3)
        ax.legend(title="mean and 95% bootstrap band", fontsize="small")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out

