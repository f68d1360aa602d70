"""``rlpipe tune``: hyperparameter search on Optuna (the ``tune`` extra).

Glossary: a **study** is one search, stored in ``STUDY_DIR/study.db`` (SQLite), so running the
same command again continues it; a **trial** is one training run with sampled values, an
ordinary run directory ``STUDY_DIR/trial-<number>`` (``rlpipe eval``, ``plot`` and ``resume``
work on it). A trial's value is its **final evaluation**: the last evaluation figure of the run
(the mean return, or the success rate with ``env.eval_metric``), so give the trials an
``eval_freq`` that evaluates near the end of their budget.

Sampling is TPE (seeded); pruning is the median rule on the evaluation curve: each evaluation
is reported to the trial at its env step (a middleware after the evaluator), and a trial whose
best figure so far is below the median of earlier trials at the same env step stops there
(not before :data:`STARTUP_TRIALS` trials have finished, nor in the first third of the budget).
``--jobs J`` runs J worker processes on the same study (processes, not threads: a run seeds
torch's global generator). A trial whose training diverges (NaN loss) is marked failed and the
search goes on. When it ends, the best trial's config is written to ``STUDY_DIR/best.yaml``.
"""
from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlpipe.config import Config, ConfigError, dump_config, load_config
from rlpipe.entry import train
from rlpipe.entry.stop import graceful_stop
from rlpipe.errors import MissingDependencyError, RlpipeError
from rlpipe.framework.context import OnlineRLContext
from rlpipe.framework.middleware.functional.trainer import TrainingDivergedError
from rlpipe.tools.search_space import Param, as_overrides

if TYPE_CHECKING:
    import optuna

STARTUP_TRIALS = 5
"""Trials that finish before the pruner stops any (the median of fewer says little)."""
STUDY_NAME = "rlpipe"
FINISHED_STATES = ("COMPLETE", "PRUNED")
"""Trial states that count toward ``--trials`` (a failed or interrupted trial is tried again)."""


class TuneStoppedError(RlpipeError, RuntimeError):
    """A signal stopped a trial: the study keeps what finished; running the command again continues it."""

    def __init__(self, signal_name: str, where: str) -> None:
        super().__init__(f"stopped by {signal_name} {where}; run the same command again to continue the study")
        self.signal_name = signal_name


def _optuna() -> Any:
    try:
        import optuna
    except ImportError:
        raise MissingDependencyError("rlpipe tune needs optuna: pip install 'rlpipe[tune]'") from None
    return optuna


@dataclass(frozen=True)
class Search:
    """What a study searches: a config (preset or YAML), fixed overrides and the space."""

    source: str
    fixed: tuple[str, ...]
    space: tuple[Param, ...]
    study_dir: Path
    seed: int

    def config(self, values: dict[str, Any], *extra: str) -> Config:
        """The config of a trial with the parameters' ``values``."""
        return load_config(self.source, [*self.fixed, *as_overrides(self.space, values), *extra])

    def check(self) -> None:
        """Every range end and choice makes a valid config: a one-line :class:`ConfigError` naming
        the key before any trial runs."""
        for param in self.space:
            for value in param.examples():
                load_config(self.source, [*self.fixed, *as_overrides([param], {param.key: value})])

    def description(self) -> str:
        """What a resumed study must still search (the seed of its sampler may change)."""
        return json.dumps({"source": self.source, "fixed": list(self.fixed),
                           "space": [{"kind": type(p).__name__, **asdict(p)} for p in self.space]}, default=str)


@dataclass
class TuneResult:
    """The outcome of :func:`tune`, printed as JSON by ``rlpipe tune``."""

    study_dir: str
    best_trial: int
    best_value: float
    best_params: dict[str, Any]
    best_config: str
    trials: dict[str, int]
    """How many trials of the study ended in each state (``COMPLETE``, ``PRUNED``, ``FAIL``, ...)."""


class evaluation_reporter:  # noqa: N801 - middleware are named like functions
    """Middleware (``after_evaluate``): report each evaluation figure (``ctx.eval_value``) to the
    Optuna ``trial`` at ``ctx.env_step``; when the trial's pruner says stop, set ``ctx.finish``
    (the run ends as at its budget: final checkpoint, summary) and remember it in :attr:`pruned`."""

    def __init__(self, trial: Any) -> None:
        self._trial = trial
        self.pruned = False

    def __call__(self, ctx: OnlineRLContext) -> None:
        if ctx.eval_value is None:
            return
        self._trial.report(ctx.eval_value, ctx.env_step)
        if self._trial.should_prune():
            self.pruned = True
            ctx.finish = True


def _objective(search: Search, trial: optuna.Trial) -> float:
    """Train one trial in ``STUDY_DIR/trial-<number>``; its final evaluation figure."""
    optuna = _optuna()
    values = {p.key: p.suggest(trial) for p in search.space}
    run_dir = search.study_dir / f"trial-{trial.number}"
    trial.set_user_attr("run_dir", str(run_dir))
    reporter = evaluation_reporter(trial)
    summary = train(search.config(values, "run.progress=false"), run_dir,
                    middleware={"after_evaluate": [reporter]}).summary
    if summary.stopped_by is not None:
        raise TuneStoppedError(summary.stopped_by, f"during trial {trial.number}")
    if reporter.pruned:
        raise optuna.TrialPruned(f"pruned at env step {summary.env_step}")
    if summary.last_eval_return is None:
        raise ConfigError(f"trial {trial.number} ran no evaluation; lower policy.eval.evaluator.eval_freq")
    return summary.last_eval_return


def _open_study(search: Search, worker: int) -> optuna.Study:
    """The study in ``STUDY_DIR/study.db``, made on first use; refused when it searches something else."""
    optuna = _optuna()
    cfg = load_config(search.source, search.fixed)
    study = optuna.create_study(
        study_name=STUDY_NAME, storage=f"sqlite:///{(search.study_dir / 'study.db').resolve()}", load_if_exists=True,
        direction="maximize", sampler=optuna.samplers.TPESampler(seed=search.seed + worker),
        pruner=optuna.pruners.MedianPruner(n_startup_trials=STARTUP_TRIALS, n_warmup_steps=cfg.run.max_env_step // 3),
    )
    described = study.user_attrs.get("search")
    if described is None:
        study.set_user_attr("search", search.description())
    elif described != search.description():
        raise ConfigError(f"tune: {search.study_dir} holds a study of another config or search space; give the "
                          "same arguments to continue it, or another --study-dir")
    return study


def _run_trials(search: Search, study: optuna.Study, n_trials: int) -> None:
    """Run ``n_trials`` trials of ``study`` in this process."""
    study.optimize(lambda trial: _objective(search, trial), n_trials=n_trials, catch=(TrainingDivergedError,))


def _worker(search: Search, n_trials: int, worker: int) -> None:
    """A ``--jobs`` process: its trials; a user error as one line and exit status 2, a stop by
    signal as ``128 + signal``. It leaves the terminal's process group, so Ctrl-C reaches it once,
    passed on by the parent (twice would stop its trial at once, unsaved)."""
    os.setpgrp()
    try:
        _run_trials(search, _open_study(search, worker), n_trials)
    except TuneStoppedError as err:
        sys.exit(128 + signal.Signals[err.signal_name].value)
    except RlpipeError as err:
        print(f"rlpipe tune (worker {worker}): error: {err}", file=sys.stderr)
        sys.exit(2)


def _run_workers(search: Search, shares: Sequence[int]) -> None:
    """One process per share of trials; a signal this process gets is passed on to them (each
    finishes its trial's iteration and stops, as ``rlpipe train`` does)."""
    spawn = multiprocessing.get_context("spawn")
    workers = [spawn.Process(target=_worker, args=(search, n, i)) for i, n in enumerate(shares) if n > 0]
    with graceful_stop() as stop:
        for process in workers:
            process.start()
        forwarded = False
        while any(process.is_alive() for process in workers):
            for process in workers:
                process.join(timeout=1.0)  # a bounded wait, so a signal to this process is passed on soon
            if stop.received is not None and not forwarded:
                for process in workers:
                    if process.pid is not None and process.is_alive():
                        os.kill(process.pid, stop.received)
                forwarded = True
    failed = [(i, p.exitcode) for i, p in enumerate(workers) if p.exitcode not in (0, None)]
    if stop.received is not None:
        raise TuneStoppedError(stop.received.name, "while the workers ran their trials")
    if failed:
        raise RlpipeError(f"tune: worker {failed[0][0]} stopped with exit status {failed[0][1]} (its error is above)")


def tune(source: str | Path, space: Sequence[Param], trials: int, study_dir: Path | None = None,
         fixed: Sequence[str] = (), jobs: int = 1, seed: int | None = None) -> TuneResult:
    """Search ``space`` for the config ``source`` (preset or YAML, with the ``fixed`` overrides)
    until the study in ``study_dir`` (default ``tunes/<exp_name>``) has ``trials`` finished
    (complete or pruned) trials, in ``jobs`` processes; write the best config to
    ``study_dir/best.yaml``. ``seed`` seeds the TPE sampler (default: the config's seed; worker
    ``i`` uses ``seed + i``). Each trial trains with the config's own seed."""
    base = load_config(source, fixed)
    search = Search(str(source), tuple(fixed), tuple(space), study_dir or Path("tunes") / base.exp_name,
                    base.seed if seed is None else seed)
    if not search.space:
        raise ConfigError("tune: nothing to search; give at least one key=low:high or key=[a, b] argument")
    search.check()
    search.study_dir.mkdir(parents=True, exist_ok=True)
    study = _open_study(search, 0)
    remaining = max(0, trials - _count(study, FINISHED_STATES))
    if jobs == 1:
        _run_trials(search, study, remaining)
    elif remaining:
        _run_workers(search, [remaining // jobs + (i < remaining % jobs) for i in range(jobs)])
    return _write_best(search, study)


def _count(study: optuna.Study, states: Sequence[str]) -> int:
    return sum(trial.state.name in states for trial in study.get_trials(deepcopy=False))


def _write_best(search: Search, study: optuna.Study) -> TuneResult:
    """Write the best trial's config to ``STUDY_DIR/best.yaml``; its figures."""
    trials = study.get_trials(deepcopy=False)
    if not any(t.state.name == "COMPLETE" for t in trials):
        raise RlpipeError(f"tune: no trial of {search.study_dir} completed (all pruned or failed); run more trials")
    best = study.best_trial
    values = {p.key: p.value(best.params[p.key]) for p in search.space}
    path = search.study_dir / "best.yaml"
    dump_config(search.config(values), path)
    states: dict[str, int] = {}
    for trial in trials:
        states[trial.state.name] = states.get(trial.state.name, 0) + 1
    return TuneResult(str(search.study_dir), best.number, study.best_value, values, str(path), states)
