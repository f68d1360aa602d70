"""``run_training(cfg, options)``: the embedded single-process pipeline behind ``rlpipe train``,
``rlpipe resume`` and ``rlpipe.train``, with its run directories and resume points."""
from __future__ import annotations

import logging
import shutil
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from rlpipe.config import Config, dump_config
from rlpipe.entry.options import TrainOptions
from rlpipe.entry.stop import graceful_stop
from rlpipe.entry.summary import RunSummary, SummaryError, reached_cap, summary_tracker
from rlpipe.envs.vector import worker_report_log
from rlpipe.errors import RlpipeError, first_line
from rlpipe.framework import OnlineRLContext, Task
from rlpipe.framework.middleware import (
    CkptSaver,
    SaveSettings,
    has_resume_point,
    latest_checkpoint,
    online_logger,
    progress_bar,
    restore_checkpoint,
)
from rlpipe.policy.frame import device_of
from rlpipe.recipes.backends import remote_collect_half
from rlpipe.recipes.build import Parts, build_parts
from rlpipe.recipes.hooks import HOOK_POINT, hook_runner
from rlpipe.recipes.pipeline import Middleware, use_training_pipeline
from rlpipe.utils.checkpoint import RUN_RECORD, CheckpointError, record_seal
from rlpipe.utils.metrics import MetricsWriter, read_metrics
from rlpipe.utils.precision import bf16_fallback_reason
from rlpipe.utils.provenance import code_version, machine_description

logger = logging.getLogger(__name__)


class RunDirError(RlpipeError, ValueError):
    """The run directory cannot be used without overwriting an earlier run."""


RUN_FILES = ("config.yaml", "metrics.jsonl", "summary.json", RUN_RECORD)
"""What a run writes before its first checkpoint (besides ``tb/``)."""


def prepare_run_dir(run_dir: Path, overwrite: bool = False, overwrite_empty: bool = False) -> Path:
    """Create ``run_dir``; refuse one that already holds a run, so nothing saved is lost.

    ``overwrite``: a run there is removed first (asked for by name). ``overwrite_empty``: a run
    stopped before its first checkpoint (nothing to resume) may be started again in place.
    """
    if (run_dir / "config.yaml").exists():
        if overwrite:
            shutil.rmtree(run_dir)
        elif not overwrite_empty:
            raise RunDirError(f"run directory {run_dir} already holds a run: pass overwrite=True (--overwrite) to "
                              "start again there, resume=True (rlpipe resume) to continue it, or another run_dir")
        elif has_resume_point(run_dir):
            raise RunDirError(f"run directory {run_dir} holds checkpoints: resume it (rlpipe resume {run_dir}) "
                              "instead of starting it again")
        else:
            for name in RUN_FILES:
                (run_dir / name).unlink(missing_ok=True)
            shutil.rmtree(run_dir / "tb", ignore_errors=True)
            shutil.rmtree(run_dir / "ckpt", ignore_errors=True)  # at most the stopped run's best policy
    run_dir.mkdir(parents=True, exist_ok=True)
    return run_dir


def remove_stray_temp_files(run_dir: Path) -> list[Path]:
    """Delete the temporary files of writes a crash interrupted (``.NAME.xxxx`` beside
    checkpoints, ``*.tmp`` buffers, ``.summary.json.tmp``); returns what was removed."""
    stray = [*(run_dir / "ckpt").glob(".*"), *(run_dir / "ckpt").glob("*.tmp"), *run_dir.glob(".*.tmp")]
    for path in stray:
        path.unlink(missing_ok=True)
    return stray


@dataclass
class ResumePoint:
    """Where an earlier run in a run directory stopped: its latest checkpoint, buffer and summary,
    and the records of its ``metrics.jsonl``."""

    checkpoint: dict[str, Any]
    buffer_path: Path
    summary: RunSummary
    records: list[dict[str, Any]]

    @classmethod
    def find(cls, run_dir: Path, allow_unsealed: bool = False) -> ResumePoint:
        """Read the resume point of ``run_dir``; one-line errors when something is missing.
        ``allow_unsealed``: see :func:`~rlpipe.framework.middleware.latest_checkpoint`."""
        if not (run_dir / "config.yaml").is_file():
            raise RunDirError(f"{run_dir} is not a run directory (no config.yaml): nothing to resume")
        remove_stray_temp_files(run_dir)
        if not has_resume_point(run_dir):
            again = f"rlpipe train {run_dir / 'config.yaml'} --run-dir {run_dir} --overwrite-empty"
            raise RunDirError(f"{run_dir} was stopped before its first checkpoint: nothing to resume; start it "
                              f"again with `{again}`")
        unit = latest_checkpoint(run_dir, allow_unsealed=allow_unsealed)
        summary = _earlier_summary(run_dir, unit.header.run_id)
        if unit.header.run_id is not None and summary.run_id is not None and unit.header.run_id != summary.run_id:
            raise CheckpointError(f"checkpoint {unit.path} belongs to run {unit.header.run_id}, not to this run "
                                  f"({summary.run_id}): was it copied from another run?")
        try:
            records = read_metrics(run_dir)
        except ValueError as err:
            raise RunDirError(f"{run_dir / 'metrics.jsonl'} is damaged ({first_line(err)}): the run's evaluations "
                              "cannot be read back") from None
        return cls(unit.state, unit.buffer_path, summary, records)

    def restore(self, parts: Parts, ctx: OnlineRLContext) -> None:
        """Load policy (and reward model), counters, RNG and replay buffer."""
        restore_checkpoint(self.checkpoint, parts.policy, ctx, parts.reward_model)
        parts.buffer.load_data(str(self.buffer_path))


def _earlier_summary(run_dir: Path, run_id: str | None) -> RunSummary:
    """The summary an earlier run wrote; rebuilt when it is missing or damaged (it is derived data:
    the evaluations come back from ``metrics.jsonl``, counters from the checkpoint, the run id
    from the checkpoint's header), with one warning line for a damaged one."""
    path = run_dir / "summary.json"
    if path.is_file():
        try:
            return RunSummary.read(path)
        except SummaryError as err:
            logger.warning("%s: rebuilt from metrics.jsonl and the checkpoint (its wall time starts again at 0)", err)
    return RunSummary(run_id=run_id)


def default_run_dir(cfg: Config, root: Path = Path("runs")) -> Path:
    """``runs/<exp_name>-seed<seed>``, with ``-2``, ``-3``, ... when taken."""
    base = root / f"{cfg.exp_name}-seed{cfg.seed}"
    candidate, n = base, 1
    while candidate.exists():
        n += 1
        candidate = base.with_name(f"{base.name}-{n}")
    return candidate


def describe_run(cfg: Config, run_dir: Path) -> str:
    """One line saying what trains where, on which device, and how often it learns (the replay ratio)."""
    policy, ratio, offline = cfg.policy, cfg.updates_per_env_step, cfg.offline
    if cfg.offline_only and offline is not None:
        updates = f"offline, {policy.learn.update_per_collect} gradient updates per iteration from {offline.dataset}"
    elif ratio is None:
        episodes = policy.collect.n_episode
        updates = (f"{policy.learn.update_per_collect} gradient updates per "
                   f"{'episode' if episodes == 1 else f'{episodes} episodes'}")
    else:
        updates = (
            f"{policy.learn.update_per_collect} gradient updates per {cfg.env_steps_per_collect} env steps "
            f"(replay ratio {ratio:.3g})"
        )
    if offline is not None and offline.online:
        pretrain = f" after {offline.pretrain_iter} updates on it alone" if offline.pretrain_iter else ""
        updates += f", each batch {offline.dataset_share:.0%} from {offline.dataset}{pretrain}"
    device = device_of(policy)
    precision = ""
    if policy.learn.precision != "fp32":
        fallback = bf16_fallback_reason(device) is not None
        precision = ", fp32 products (no native bfloat16 here)" if fallback else f", {policy.learn.precision} products"
    where = f"{run_dir} on {describe_device(device, policy.cuda)}"
    return f"{cfg.exp_name} ({policy.type}) in {where}: {updates}{precision}"


def describe_device(device: torch.device, cuda_asked: bool) -> str:
    """``cpu``, ``cuda (GPU name)``, or ``cpu (policy.cuda=true, but torch sees no GPU)``."""
    if device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    return "cpu (policy.cuda=true, but torch sees no GPU)" if cuda_asked else "cpu"


def run_training(cfg: Config, options: TrainOptions) -> RunSummary:
    """Train the agent ``cfg`` describes as ``options`` say, writing config, metrics, checkpoints and
    summary to ``options.run_dir``: what ``rlpipe train``, ``rlpipe resume`` and ``rlpipe.train`` run.

    Everything that can be checked (env id, model sizes, HER settings, the run directory, the Ray
    cluster of ``distributed.backend=ray``) is checked before the run directory is touched: a
    refused run (or resume) leaves an earlier run's directory as it was, ``overwrite`` included.
    With ``resume``, training continues from the latest checkpoint and saved buffer; a resumed run
    that already reached its cap (:func:`reached_cap`) trains nothing: a warning says so and its
    summary is returned. The pipeline runs on a :class:`Task` of its own, so other tasks in the
    process are untouched. SIGINT and SIGTERM stop it gracefully (:mod:`rlpipe.entry.stop`).
    """
    run_dir = options.run_dir if options.run_dir is not None else default_run_dir(cfg)
    with build_parts(cfg) as parts, remote_collect_half(parts.cfg, parts.policy) as collect:
        earlier = ResumePoint.find(run_dir, options.allow_unsealed) if options.resume else None
        done = reached_cap(earlier.checkpoint["counters"], parts.cfg) if earlier is not None else None
        if earlier is not None and done is not None:
            logger.warning("%s already reached %s: nothing to train (raise the cap to continue)", run_dir, done)
            return earlier.summary
        ctx = OnlineRLContext()
        if earlier is None:
            prepare_run_dir(run_dir, options.overwrite, options.overwrite_empty)
        else:
            earlier.restore(parts, ctx)
        if options.announce is not None:
            options.announce(describe_run(parts.cfg, run_dir))
        dump_config(parts.cfg, run_dir / "config.yaml")
        record_seal(run_dir)
        summary_path = run_dir / "summary.json"
        tracker = summary_tracker(
            parts.cfg.env.stop_value, earlier.summary if earlier else None, parts.cfg.updates_per_env_step,
            parts.cfg.env.eval_metric, summary_path,
        )
        if earlier is not None:
            tracker.summary.merge_evaluations(earlier.records, parts.cfg.env.stop_value)
        tracker.summary.run_id = tracker.summary.run_id or uuid.uuid4().hex  # older runs had none
        tracker.summary.add_provenance(code_version(), machine_description(device_of(parts.cfg.policy)))
        writer = MetricsWriter(run_dir)
        env_errors = logging.FileHandler(run_dir / "env_errors.log", delay=True)  # made on the first report
        worker_report_log.addHandler(env_errors)
        runner = hook_runner(options.hooks, parts.policy, parts.buffer, parts.cfg)
        extra = {**options.middleware}
        if options.hooks:
            extra[HOOK_POINT] = [*extra.get(HOOK_POINT, ()), runner]
        try:
            with graceful_stop() as stop:
                _run_pipeline(parts, ctx, run_dir, writer, tracker, stop, extra, collect, options.allow_unsealed)
            if stop.received is not None:
                tracker.summary.stopped_by = stop.received.name
            elif runner.stopped_by is not None:
                tracker.summary.stopped_by = runner.stopped_by
        finally:
            worker_report_log.removeHandler(env_errors)
            env_errors.close()
            writer.close()
            tracker.summary.write(summary_path)
    return tracker.summary


def _run_pipeline(
    parts: Parts, ctx: OnlineRLContext, run_dir: Path, writer: MetricsWriter, tracker: summary_tracker,
    stop: graceful_stop, middleware: Mapping[str, Sequence[Middleware]] | None, collect: Middleware | None,
    allow_unsealed: bool = False,
) -> None:
    """Add checkpoints, logging and progress to the training pipeline and run from ``ctx`` (an
    earlier run's counters when resumed) until a stop condition (``stop``, first in the
    pipeline, turns SIGINT and SIGTERM into one). ``collect``: see
    :func:`~rlpipe.recipes.backends.remote_collect_half`."""
    cfg = parts.cfg
    if ctx.env_step > 0 and parts.local_collector_env is not None:  # remote collectors reseed themselves
        parts.local_collector_env.reset(seed=cfg.seed + ctx.env_step)  # fresh episodes, not a replay of the first ones
    task = Task()
    total, counter = cfg.run.max_env_step, "env_step"
    if cfg.offline_only and cfg.run.max_train_iter is not None:  # the config requires the cap offline
        total, counter = cfg.run.max_train_iter, "train_iter"
    with task.start(ctx=ctx), progress_bar(total, cfg.run.progress, counter=counter) as show:
        task.use(stop)
        use_training_pipeline(task, parts, middleware, collect, flush=True)  # the final save holds every transition
        settings = SaveSettings(buffer_=parts.buffer, keep_last=cfg.run.keep_checkpoints,
                                reward_model=parts.reward_model, config=cfg.model_dump(mode="json"),
                                run_id=tracker.summary.run_id, allow_unsealed=allow_unsealed)
        task.use(CkptSaver(parts.policy, run_dir, cfg.run.save_freq, settings=settings))
        task.use(online_logger(writer, cfg.run.log_freq, clock=tracker.elapsed))
        task.use(tracker)
        task.use(show)
        task.run()
