"""``rlpipe sweep``: presets x seeds, each an ordinary run, on local processes or as Ray tasks.

Glossary: a **sweep** is the runs of some presets under some seeds with the same overrides, kept
in one directory ``OUT``: ``OUT/<preset>-seed<S>`` per run (a run directory as ``rlpipe train``
writes it: ``rlpipe eval``, ``plot`` and ``resume`` work on it), ``OUT/logs/<run>.log`` (what the
run printed) and ``OUT/results.jsonl`` (one :class:`~rlpipe.tools.results.RunResult` per finished
run, written as each finishes; ``rlpipe report OUT`` reads it). A run's **group** is its preset, or
``<preset>:<label>`` with ``--label`` (so the same preset under other overrides is another group).

Every run is ``rlpipe train`` (or ``rlpipe resume``) in a process of its own, with one torch
thread, so runs never share a random generator and a crash stays in its run. Running the same
command again continues the sweep: finished runs (in ``results.jsonl``) are skipped, killed ones
resume from their latest checkpoint, runs that never reached one start again. ``--jobs N`` runs N
at once on this machine; ``--backend ray`` sends each run to a Ray cluster as a task needing one
CPU (``--address`` of a running cluster, else one started here), so the same command uses many
machines: the task trains on the node it lands on and sends its result back, so ``results.jsonl``
is complete on this machine; resuming a killed run on another node needs ``OUT`` on a shared
filesystem. SIGINT/SIGTERM stop every run gracefully (final checkpoint), as for ``rlpipe train``.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from rlpipe.config import load_config
from rlpipe.entry.stop import graceful_stop
from rlpipe.entry.summary import run_has_ended
from rlpipe.errors import RlpipeError
from rlpipe.framework.middleware import has_resume_point
from rlpipe.tools.results import RESULTS_FILE, RunResult, read_results, result_of_run, write_results

MANIFEST = "sweep.json"
"""What a sweep directory is a sweep of (its overrides and label); a rerun must give the same."""
SINGLE_THREAD_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
POLL_S = 1.0
"""How often the local backend looks for finished runs (a bounded wait, so a signal is passed on soon)."""


class SweepError(RlpipeError, ValueError):
    """A sweep's arguments or directory cannot be used; the message names what."""


class SweepStoppedError(RlpipeError, RuntimeError):
    """A signal stopped the sweep: finished runs are recorded, the others saved a final checkpoint."""

    def __init__(self, signal_name: str) -> None:
        super().__init__(f"stopped by {signal_name}; run the same command again to continue the sweep")
        self.signal_name = signal_name


def parse_seeds(text: str) -> list[int]:
    """``"0-9"``, ``"0,3,5"`` or ``"0-4,10"`` as a sorted list of distinct seeds."""
    seeds: set[int] = set()
    for part in text.split(","):
        low, sep, high = part.strip().partition("-")
        try:
            first, last = int(low), int(high) if sep else int(low)
        except ValueError:
            raise SweepError(f"--seeds: '{part.strip()}' is not a seed or a range like 0-9") from None
        if first < 0 or last < first:
            raise SweepError(f"--seeds: '{part.strip()}' is not a range of non-negative seeds, low to high")
        seeds.update(range(first, last + 1))
    return sorted(seeds)


def preset_label(preset: str) -> str:
    """What names a preset's runs and group: the preset's name, or a config file's name without
    ``.yaml`` (its runs then sit in the sweep's directory, not beside the file)."""
    path = Path(preset)
    return path.stem if path.suffix in (".yaml", ".yml") else path.name


@dataclass(frozen=True)
class SweepRun:
    """One run of a sweep: a preset under a seed, in ``OUT/<label>-seed<S>`` (:func:`preset_label`)."""

    preset: str
    seed: int
    group: str
    overrides: tuple[str, ...] = ()
    final_episodes: int | None = None
    """Episodes of a separate evaluation of the final policy after training (None: none)."""

    @property
    def name(self) -> str:
        return f"{preset_label(self.preset)}-seed{self.seed}"


@dataclass(frozen=True)
class Sweep:
    """The runs of ``presets`` x ``seeds`` with ``overrides``, kept in ``out``."""

    presets: tuple[str, ...]
    seeds: tuple[int, ...]
    overrides: tuple[str, ...]
    out: Path
    label: str | None = None
    final_episodes: int | None = None
    """Evaluate each run's final policy over this many episodes after training (``rlpipe eval
    --checkpoint final``): its figure then stands for the run's final one (Atari-100k's protocol)."""

    def runs(self) -> list[SweepRun]:
        suffix = f":{self.label}" if self.label else ""
        return [SweepRun(preset, seed, f"{preset_label(preset)}{suffix}", self.overrides, self.final_episodes)
                for preset in self.presets for seed in self.seeds]

    def check(self) -> None:
        """Every preset loads with the overrides (a one-line :class:`ConfigError` naming the key
        before any run starts), and ``out`` holds no sweep of other overrides or another label."""
        if not self.presets or not self.seeds:
            raise SweepError("sweep: give at least one preset and one seed")
        for key in ("seed", "exp_name"):
            if any(text.partition("=")[0].strip() == key for text in self.overrides):
                raise SweepError(f"sweep: '{key}' is set by the sweep for each run; leave it out of the overrides")
        labels = [preset_label(preset) for preset in self.presets]
        twice = sorted({label for label in labels if labels.count(label) > 1})
        if twice:
            raise SweepError(f"sweep: presets named '{twice[0]}' more than once (each names its runs and group); "
                             "give each config file a name of its own")
        for preset in self.presets:
            load_config(preset, self.overrides)
        manifest = self.out / MANIFEST
        wanted = {"overrides": list(self.overrides), "label": self.label, "final_episodes": self.final_episodes}
        if manifest.is_file():
            found = json.loads(manifest.read_text())
            if found != wanted:
                held = ", ".join(f"{key} {value!r}" for key, value in found.items())
                raise SweepError(f"sweep: {self.out} holds a sweep with {held}; give the same to continue it, or "
                                 "another --out")
        else:
            self.out.mkdir(parents=True, exist_ok=True)
            manifest.write_text(json.dumps(wanted, indent=1) + "\n")

    def command(self, run: SweepRun) -> list[str] | None:
        """The ``rlpipe`` arguments that start or continue ``run`` from where its directory is; None
        for a run that ended (the sweep was killed before it recorded it)."""
        run_dir = self.out / run.name
        if run_has_ended(run_dir):
            return None
        if has_resume_point(run_dir):
            return ["resume", str(run_dir), "--no-progress"]
        return ["train", run.preset, *run.overrides, f"seed={run.seed}", "--run-dir", str(run_dir), "--no-progress",
                "--overwrite-empty"]


@dataclass
class RunOutcome:
    """How one run of a sweep ended: its result, or the exit status and the last line it printed."""

    run: SweepRun
    result: RunResult | None
    returncode: int
    last_line: str = ""


def run_one(out: str, run: SweepRun, arguments: list[str] | None,
            on_start: Callable[[subprocess.Popen[bytes]], None] | None = None) -> dict[str, Any]:
    """Train ``run`` in a child ``rlpipe`` process (its own session, one thread; ``arguments`` None:
    it is trained already), evaluate its final policy if the run asks for it, and read its result;
    its outcome as plain data, since this is also the body of a Ray task. ``on_start`` is given the
    child, so a signal can be passed on to it; a ``KeyboardInterrupt`` here (a Ray task cancelled)
    stops the child gracefully and waits for its final checkpoint."""
    out_dir = Path(out)
    run_dir, log = out_dir / run.name, out_dir / "logs" / f"{run.name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    returncode = 0 if arguments is None else _child(arguments, log, on_start)
    final_eval = None
    if returncode == 0 and run.final_episodes is not None:
        evaluation = ["eval", str(run_dir), "--checkpoint", "final", "--episodes", str(run.final_episodes)]
        returncode = _child(evaluation, log, on_start)
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    outcome: dict[str, Any] = {"returncode": returncode, "last_line": lines[-1] if lines else ""}
    if returncode == 0:
        if run.final_episodes is not None:  # what `rlpipe eval` printed last: one JSON object
            final_eval = json.loads(next(line for line in reversed(lines) if line.startswith("{")))
        resumed = "$ rlpipe resume " in log.read_text(errors="replace")
        outcome["result"] = result_of_run(run_dir, run.group, run.overrides, resumed, final_eval).to_json()
    return outcome


def _child(arguments: list[str], log: Path, on_start: Callable[[subprocess.Popen[bytes]], None] | None) -> int:
    """Run ``rlpipe ARGUMENTS`` with its output appended to ``log``; its exit status."""
    with log.open("a") as sink:
        sink.write(f"$ rlpipe {' '.join(arguments)}\n")
        sink.flush()
        child = subprocess.Popen([sys.executable, "-m", "rlpipe.cli.main", *arguments], stdout=sink,
                                 stderr=subprocess.STDOUT, env={**os.environ, **SINGLE_THREAD_ENV},
                                 start_new_session=True)
        if on_start is not None:
            on_start(child)
        try:
            return child.wait()
        except KeyboardInterrupt:
            child.send_signal(signal.SIGINT)
            return child.wait()


def _outcome(run: SweepRun, data: dict[str, Any]) -> RunOutcome:
    result = RunResult.from_dict(json.loads(data["result"]), run.name) if "result" in data else None
    return RunOutcome(run, result, data["returncode"], data["last_line"])


@dataclass(frozen=True)
class Placement:
    """Where a sweep's runs train: ``jobs`` at a time on this machine (``local``) or as Ray tasks
    (``ray``) on the cluster at ``address`` (None: one started here)."""

    backend: str = "local"
    jobs: int = 1
    address: str | None = None

    def check(self) -> None:
        if self.backend not in ("local", "ray"):
            raise SweepError(f"sweep: --backend must be local or ray, got {self.backend!r}")
        if self.jobs < 1:
            raise SweepError(f"sweep: --jobs must be at least 1, got {self.jobs}")
        if self.address is not None and self.backend != "ray":
            raise SweepError("sweep: --address needs --backend ray")


Launcher = Callable[[Sweep, list[SweepRun], Placement, graceful_stop], Iterator[RunOutcome]]


def _local_launcher(sweep: Sweep, runs: list[SweepRun], where: Placement,
                    stop: graceful_stop) -> Iterator[RunOutcome]:
    """Run ``runs``, ``jobs`` at a time, each in a process of its own on this machine; yield each
    outcome as it comes. After a signal no run starts, and the running ones are passed the signal.
    The runs end with this process even when it is killed (:func:`reaped_processes`)."""
    from rlpipe.distributed.cluster import reaped_processes

    pending = list(runs)
    children: list[subprocess.Popen[bytes]] = []
    with reaped_processes(str((sweep.out / "logs").resolve())), ThreadPoolExecutor(where.jobs) as pool:
        running: dict[Future[dict[str, Any]], SweepRun] = {}
        forwarded = False
        while pending or running:
            while pending and len(running) < where.jobs and stop.received is None:
                run = pending.pop(0)
                running[pool.submit(run_one, str(sweep.out), run, sweep.command(run), children.append)] = run
            if stop.received is not None and not forwarded:
                for child in children:
                    if child.poll() is None:
                        child.send_signal(stop.received)
                forwarded, pending = True, []
            done, _ = wait(running, timeout=POLL_S, return_when=FIRST_COMPLETED)
            for future in done:
                yield _outcome(running.pop(future), future.result())


def _ray_launcher(sweep: Sweep, runs: list[SweepRun], where: Placement,
                  stop: graceful_stop) -> Iterator[RunOutcome]:
    """Each run a Ray task needing one CPU, at most ``where.jobs`` in flight, on the cluster at
    ``where.address`` or on one started here; yield each outcome as it comes. After a signal no
    run starts, and the running tasks are cancelled (each stops its run gracefully)."""
    from rlpipe.config.schema import DistributedConfig
    from rlpipe.distributed.cluster import ray_session

    with ray_session(DistributedConfig(backend="ray", address=where.address), where.jobs) as ray:
        task = ray.remote(num_cpus=1, max_retries=0)(run_one)
        pending = list(runs)
        running: dict[Any, SweepRun] = {}
        cancelled = False
        while pending or running:
            while pending and len(running) < where.jobs and stop.received is None:
                run = pending.pop(0)
                running[task.remote(str(sweep.out.resolve()), run, sweep.command(run))] = run
            if stop.received is not None and not cancelled:
                for ref in running:
                    ray.cancel(ref)
                cancelled, pending = True, []
            ready, _ = ray.wait(list(running), num_returns=1, timeout=POLL_S)
            for ref in ready:
                run = running.pop(ref)
                try:
                    yield _outcome(run, ray.get(ref))
                except ray.exceptions.TaskCancelledError:
                    continue  # stopped by the signal: it resumes next time


def run_sweep(sweep: Sweep, where: Placement = Placement(), console: Console | None = None) -> list[RunOutcome]:
    """Run the runs of ``sweep`` not recorded yet; one line per finished run and a bar for the whole
    sweep on ``console``. Returns the outcomes of the runs run now (skipped ones are not among them)."""
    where.check()
    sweep.check()
    console = console or Console()
    results_path = sweep.out / RESULTS_FILE
    recorded = {(r.group, r.seed) for r in read_results(results_path)} if results_path.is_file() else set()
    todo = [run for run in sweep.runs() if (run.group, run.seed) not in recorded]
    total = len(sweep.runs())
    console.print(f"sweep {sweep.out}: {total} runs, {total - len(todo)} recorded already, {len(todo)} to run "
                  f"({where.backend}, {where.jobs} at a time)", soft_wrap=True, highlight=False)
    launcher: Launcher = _local_launcher if where.backend == "local" else _ray_launcher
    outcomes: list[RunOutcome] = []
    with graceful_stop() as stop, _bar(console, total, total - len(todo)) as advance:
        for outcome in launcher(sweep, todo, where, stop):
            if outcome.result is not None:
                write_results(results_path, [outcome.result])
            outcomes.append(outcome)
            console.print(_finished_line(outcome, total - len(todo) + len(outcomes), total), highlight=False,
                          soft_wrap=True)
            advance()
    if stop.received is not None:
        raise SweepStoppedError(stop.received.name)
    failed = [o for o in outcomes if o.result is None]
    if failed:
        raise RlpipeError(f"sweep: {len(failed)} of {len(outcomes)} runs failed, first {failed[0].run.name} "
                          f"(exit status {failed[0].returncode}: {failed[0].last_line}); see "
                          f"{sweep.out / 'logs'}; run the same command again to retry them")
    return outcomes


def _finished_line(outcome: RunOutcome, count: int, total: int) -> str:
    """``[3/20] cartpole-dqn seed 2: final 500, best 500, reached 475 at env step 26,496 (41 s)``."""
    run, result = outcome.run, outcome.result
    head = f"[{count}/{total}] {run.group} seed {run.seed}"
    if result is None:
        return f"{head}: FAILED (exit status {outcome.returncode}): {outcome.last_line}"
    text = f"{head}: final {result.final:.4g}" + (f", best {result.best:.4g}" if result.best is not None else "")
    reached = result.first_reaching(result.threshold) if result.threshold is not None else None
    if reached is not None:
        text += f", reached {result.threshold:g} at env step {reached[0]:,}"
    elif result.threshold is not None:
        text += f", did not reach {result.threshold:g}"
    wall = result.wall_time_s[-1] if result.wall_time_s else None
    return text + (f" ({wall:.0f} s)" if wall is not None else "")


@contextmanager
def _bar(console: Console, total: int, done: int) -> Iterator[Callable[[], None]]:
    """A bar of finished runs (drawn only on a terminal); yields the function that advances it."""
    progress = Progress(TextColumn("[bold]sweep"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=console, disable=not console.is_terminal)
    task = progress.add_task("runs", total=total, completed=done)
    with progress:
        yield lambda: progress.advance(task)
