"""Checkpoint saver middleware."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from rlpipe.framework.context import OnlineRLContext
from rlpipe.framework.task import Role, role_gated, task
from rlpipe.utils.checkpoint import save_checkpoint

COUNTERS = ("env_step", "env_episode", "train_iter", "last_eval_iter", "last_eval_value")


def checkpoint_state(policy: Any, ctx: OnlineRLContext) -> dict[str, Any]:
    """What a checkpoint holds: the policy's whole state and the pipeline's counters."""
    return {"policy": policy.state_dict(), "counters": {name: getattr(ctx, name) for name in COUNTERS}}


@role_gated(Role.LEARNER)
class CkptSaver:
    """Save ``iteration_{train_iter}.pth.tar`` every ``train_freq`` train iterations,
    ``eval.pth.tar`` whenever the evaluation return improves, and ``final.pth.tar`` when
    the task finishes (if ``save_finish``).

    Reads ``ctx.train_iter``, ``ctx.eval_value``, ``ctx.last_save_iter``; writes ``ctx.last_save_iter``.
    """

    def __init__(self, policy: Any, save_dir: str | Path, train_freq: int | None = None,
                 save_finish: bool = True) -> None:
        self._policy = policy
        self._dir = Path(save_dir) / "ckpt"
        self._train_freq = train_freq
        self._save_finish = save_finish
        self._best_eval = float("-inf")

    def __call__(self, ctx: OnlineRLContext) -> None:
        due = self._train_freq is not None and ctx.train_iter - max(ctx.last_save_iter, 0) >= self._train_freq
        if due:
            save_checkpoint(checkpoint_state(self._policy, ctx), self._dir / f"iteration_{ctx.train_iter}.pth.tar")
            ctx.last_save_iter = ctx.train_iter
        if ctx.eval_value is not None and ctx.eval_value > self._best_eval:
            self._best_eval = ctx.eval_value
            save_checkpoint(checkpoint_state(self._policy, ctx), self._dir / "eval.pth.tar")
        if task.finish and self._save_finish:
            save_checkpoint(checkpoint_state(self._policy, ctx), self._dir / "final.pth.tar")
