"""Checkpoint saver middleware, and the state a checkpoint holds."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from rlpipe.framework.context import OnlineRLContext
from rlpipe.framework.task import Role, role_gated, task
from rlpipe.utils.checkpoint import CheckpointError, load_checkpoint, save_checkpoint

COUNTERS = ("env_step", "env_episode", "train_iter", "last_eval_iter", "last_eval_value")
BUFFER_FILE = "buffer.npz"
"""The buffer saved beside the latest periodic or final checkpoint (with ``buffer_``)."""


def checkpoint_state(policy: Any, ctx: OnlineRLContext) -> dict[str, Any]:
    """What a checkpoint holds: the policy's whole state, the pipeline's counters, torch's RNG."""
    return {
        "policy": policy.state_dict(),
        "counters": {name: getattr(ctx, name) for name in COUNTERS},
        "torch_rng": torch.get_rng_state(),
    }


def restore_checkpoint(state: dict[str, Any], policy: Any, ctx: OnlineRLContext) -> None:
    """Put a :func:`checkpoint_state` back: policy, counters and torch's RNG."""
    policy.load_state_dict(state["policy"])
    for name in COUNTERS:
        setattr(ctx, name, state["counters"][name])
    torch.set_rng_state(state["torch_rng"])


def latest_checkpoint(save_dir: str | Path) -> Path:
    """The checkpoint a run continues from: ``final.pth.tar``, else the highest ``iteration_N``."""
    ckpt = Path(save_dir) / "ckpt"
    final = ckpt / "final.pth.tar"
    if final.is_file():
        return final
    iterations = sorted(ckpt.glob("iteration_*.pth.tar"), key=lambda p: int(p.name.split("_")[1].split(".")[0]))
    if not iterations:
        raise CheckpointError(f"no checkpoint to resume from in {ckpt}")
    return iterations[-1]


@role_gated(Role.LEARNER)
class CkptSaver:
    """Save ``iteration_{train_iter}.pth.tar`` every ``train_freq`` train iterations,
    ``eval.pth.tar`` whenever the evaluation return beats the best so far (also the best of
    an earlier run in the same directory), and ``final.pth.tar`` when the task finishes (if
    ``save_finish``). With ``buffer_``, the periodic and final saves also write the replay
    buffer to ``buffer.npz``, so that a run can be resumed whole.

    Reads ``ctx.train_iter``, ``ctx.eval_value``, ``ctx.last_save_iter``; writes ``ctx.last_save_iter``.
    """

    def __init__(self, policy: Any, save_dir: str | Path, train_freq: int | None = None,
                 save_finish: bool = True, buffer_: Any | None = None) -> None:
        self._policy = policy
        self._dir = Path(save_dir) / "ckpt"
        self._train_freq = train_freq
        self._save_finish = save_finish
        self._buffer = buffer_
        best = self._dir / "eval.pth.tar"
        self._best_eval = load_checkpoint(best)["counters"]["last_eval_value"] if best.is_file() else float("-inf")

    def _save(self, ctx: OnlineRLContext, name: str, with_buffer: bool) -> None:
        if with_buffer and self._buffer is not None:
            self._dir.mkdir(parents=True, exist_ok=True)
            self._buffer.save_data(str(self._dir / BUFFER_FILE))
        save_checkpoint(checkpoint_state(self._policy, ctx), self._dir / name)

    def __call__(self, ctx: OnlineRLContext) -> None:
        if self._train_freq is not None and ctx.train_iter - max(ctx.last_save_iter, 0) >= self._train_freq:
            self._save(ctx, f"iteration_{ctx.train_iter}.pth.tar", with_buffer=True)
            ctx.last_save_iter = ctx.train_iter
        if ctx.eval_value is not None and ctx.eval_value > self._best_eval:
            self._best_eval = ctx.eval_value
            self._save(ctx, "eval.pth.tar", with_buffer=False)
        if task.finish and self._save_finish:
            self._save(ctx, "final.pth.tar", with_buffer=True)
