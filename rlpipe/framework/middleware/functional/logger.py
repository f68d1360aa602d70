"""Logging middleware: metrics to a :class:`MetricsWriter` and a progress bar.

Neither consumes nor reorders ``ctx.train_output``: other middleware read it too.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from rlpipe.framework.context import OnlineRLContext
from rlpipe.utils.metrics import MetricsWriter


def _scalar_means(outputs: list[dict[str, Any]]) -> dict[str, float]:
    """The mean of each scalar over the outputs that have it (TD3's and CrossQ's actor figures
    come only from the updates that step the actor)."""
    values: dict[str, list[float]] = {}
    for out in outputs:
        for k, v in out.items():
            if isinstance(v, (int, float, np.floating)) and not isinstance(v, bool):
                values.setdefault(k, []).append(float(v))
    return {k: float(np.mean(v)) for k, v in values.items()}


def online_logger(
    writer: MetricsWriter, train_show_freq: int = 100, clock: Callable[[], float] | None = None
) -> Callable[[OnlineRLContext], None]:
    """Write the mean of the scalar learn outputs every ``train_show_freq`` train iterations,
    and every evaluation, to ``writer``.

    Reads ``ctx.train_output`` (a list of learn-output dicts), ``ctx.reward_model_output``
    (a learned reward model's figures, averaged into the same records),
    ``ctx.collect_episode_stats`` (written as ``train_episode_return_mean``,
    ``train_episode_length_mean`` and ``train_success_rate``), ``ctx.distributed_stats``
    (remote collectors' figures, written as they are), ``ctx.eval_value``,
    ``ctx.eval_output``, ``ctx.train_iter``, ``ctx.env_step`` and ``ctx.collect_kwargs``'s
    ``eps`` (written as ``eps``). Each train record after the first also has
    ``env_steps_per_s`` and ``updates_per_s`` since the previous one (wall clock,
    evaluations included; the first has no start to count from in a resumed run). With ``clock``
    (seconds since the run's start, a resumed run's time included), each eval record also has
    ``wall_time_s``, so reports can say how long a run took to reach a return.
    """
    pending: list[dict[str, Any]] = []
    pending_reward_model: list[dict[str, Any]] = []
    last_written = 0
    last_time, last_env_step = time.perf_counter(), None  # of the previous train record

    def _log(ctx: OnlineRLContext) -> None:
        nonlocal last_written, last_time, last_env_step
        if isinstance(ctx.train_output, list):
            pending.extend(ctx.train_output)
        if ctx.reward_model_output:
            pending_reward_model.append(ctx.reward_model_output)
        if pending and ctx.train_iter - last_written >= train_show_freq:
            now = time.perf_counter()
            record: dict[str, Any] = {
                "train_iter": ctx.train_iter,
                **_scalar_means(pending),
                **(_scalar_means(pending_reward_model) if pending_reward_model else {}),
                **{f"train_{k}": v for k, v in (ctx.collect_episode_stats or {}).items()},
                **(ctx.distributed_stats or {}),
            }
            if last_env_step is not None:
                elapsed = max(now - last_time, 1e-9)
                record["env_steps_per_s"] = (ctx.env_step - last_env_step) / elapsed
                record["updates_per_s"] = (ctx.train_iter - last_written) / elapsed
            if "eps" in ctx.collect_kwargs:
                record["eps"] = float(ctx.collect_kwargs["eps"])
            writer.write("train", ctx.env_step, record)
            pending.clear()
            pending_reward_model.clear()
            last_written, last_time, last_env_step = ctx.train_iter, now, ctx.env_step
        if ctx.eval_value is not None:
            returns = ctx.eval_output["episode_return"]
            writer.write("eval", ctx.env_step, {
                "train_iter": ctx.train_iter,
                "episodes": len(returns),
                "return_mean": float(np.mean(returns)),
                "return_std": float(np.std(returns)),
                "episode_length_mean": float(np.mean(ctx.eval_output["episode_length"])),
                **({"success_rate": float(np.mean(ctx.eval_output["episode_success"]))}
                   if "episode_success" in ctx.eval_output else {}),
                **({"wall_time_s": round(clock(), 2)} if clock is not None else {}),
            })

    return _log


COUNTERS = {"env_step": "env step", "train_iter": "update"}
"""What a progress bar counts (a context counter) and its name: env steps, or updates for an offline run."""


def evaluation_line(ctx: OnlineRLContext, total: int, counter: str = "env_step") -> str:
    """One line for an evaluation that just happened: where the run is (``counter`` of ``total``) and what
    it scored."""
    output = ctx.eval_output
    success = (f" | success rate {float(np.mean(output['episode_success'])):.3g}"
               if "episode_success" in output else "")
    where = f"env step {ctx.env_step}/{total} | iter {ctx.train_iter}" if counter == "env_step" else \
        f"update {ctx.train_iter}/{total}"
    return f"eval at {where} | mean return {float(np.mean(output['episode_return'])):.4g}{success}"


@contextmanager
def progress_bar(
    total: int, enabled: bool = True, console: Console | None = None, counter: str = "env_step",
) -> Iterator[Callable[[OnlineRLContext], None]]:
    """A middleware showing ``counter`` (:data:`COUNTERS`: env steps, or updates for an offline run)
    against ``total``, the last eval figure, the training episodes' mean return (and success rate),
    epsilon or SAC's temperature, the loss and the train iteration.

    When stdout is not a terminal (nohup, CI, a pipe) a bar cannot be redrawn: it prints one
    :func:`evaluation_line` per evaluation instead, as it happens. ``console``: where to draw
    (default: stdout).
    """
    console = console or Console()
    live = enabled and console.is_terminal
    progress = Progress(
        TextColumn(f"[bold]{COUNTERS[counter]}s"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        TextColumn("{task.fields[status]}"), disable=not live, transient=False, console=console,
    )
    bar = progress.add_task("train", total=total, status="")

    def _show(ctx: OnlineRLContext) -> None:
        if not live:
            if enabled and ctx.eval_value is not None:
                console.print(evaluation_line(ctx, total, counter), markup=False, highlight=False, soft_wrap=True)
            return
        last = ctx.train_output[-1] if ctx.train_output else {}
        episodes = ctx.collect_episode_stats or {}
        parts = [f"eval {ctx.last_eval_value:.3g}"]
        if "episode_return_mean" in episodes:
            parts.append(f"ep return {episodes['episode_return_mean']:.3g}")
        if "success_rate" in episodes:
            parts.append(f"success {episodes['success_rate']:.2f}")
        if "eps" in ctx.collect_kwargs:
            parts.append(f"eps {float(ctx.collect_kwargs['eps']):.3f}")
        if "alpha" in last:
            parts.append(f"alpha {last['alpha']:.3g}")
        parts += [f"loss {last.get('total_loss', float('nan')):.4g}", f"iter {ctx.train_iter}"]
        status = " | ".join(parts)
        progress.update(bar, completed=min(getattr(ctx, counter), total), status=status)

    with progress:
        yield _show
