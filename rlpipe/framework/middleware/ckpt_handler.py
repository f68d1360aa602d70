"""Checkpoint saver middleware, and the state a checkpoint holds."""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from rlpipe.framework.context import OnlineRLContext
from rlpipe.framework.task import Role, role_gated
from rlpipe.utils.checkpoint import (
    CheckpointError,
    CheckpointHeader,
    load_checkpoint,
    read_checkpoint,
    read_header,
    recorded_seal,
    save_checkpoint,
)
from rlpipe.utils.integrity import file_sha256

COUNTERS = ("env_step", "env_episode", "train_iter", "last_eval_iter", "last_eval_env_step", "last_eval_value",
            "last_save_iter")
ADDED_COUNTERS = ("last_eval_env_step",)
"""Counters that checkpoints of older releases lack: restoring one leaves the context's default."""
PERIODIC_PREFIX, CKPT_SUFFIX = "iteration_", ".pth.tar"
FINAL_CHECKPOINT, BEST_CHECKPOINT = f"final{CKPT_SUFFIX}", f"eval{CKPT_SUFFIX}"
"""The checkpoint saved when a run finishes or stops, and the one of its best evaluation."""
BUFFER_SUFFIX = ".buffer.npz"
"""``NAME.pth.tar`` has its replay buffer in ``NAME.DIGEST.buffer.npz``, the name its header gives
(``NAME.buffer.npz`` in checkpoints of format 1 and in unsealed ones)."""


def buffer_file(checkpoint: Path, header: CheckpointHeader | None = None) -> Path:
    """The buffer file saved together with ``checkpoint``: the one its ``header`` names, else
    ``NAME.buffer.npz`` beside ``NAME.pth.tar`` (the layout before buffers were named)."""
    if header is not None and header.buffer_file is not None:
        return checkpoint.with_name(Path(header.buffer_file).name)
    return checkpoint.with_name(checkpoint.name.removesuffix(CKPT_SUFFIX) + BUFFER_SUFFIX)


def checkpoint_state(
    policy: Any, ctx: OnlineRLContext, reward_model: Any | None = None, config: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """What a checkpoint holds: the policy's whole state, the pipeline's counters, torch's RNG,
    a learned reward model's state when there is one, and the run's resolved config (plain
    data) when given, so that the file alone can rebuild the policy (``rlpipe.load``)."""
    state = {
        "policy": policy.state_dict(),
        "counters": {name: getattr(ctx, name) for name in COUNTERS},
        "torch_rng": torch.get_rng_state(),
    }
    if reward_model is not None:
        state["reward_model"] = reward_model.state_dict()
    if config is not None:
        state["config"] = dict(config)
    return state


def restore_checkpoint(
    state: dict[str, Any], policy: Any, ctx: OnlineRLContext, reward_model: Any | None = None
) -> None:
    """Put a :func:`checkpoint_state` back: policy, counters, torch's RNG (and the reward model)."""
    if reward_model is not None and "reward_model" not in state:
        raise CheckpointError("the checkpoint holds no reward model, but this run has one (config key 'reward_model')")
    policy.load_state_dict(state["policy"])
    if reward_model is not None:
        reward_model.load_state_dict(state["reward_model"])
    for name in COUNTERS:
        if name in ADDED_COUNTERS and name not in state["counters"]:
            continue  # an older checkpoint: the context keeps its default
        setattr(ctx, name, state["counters"][name])
    torch.set_rng_state(state["torch_rng"])


@dataclass(frozen=True)
class ResumeUnit:
    """A checkpoint and the replay buffer saved with it, both verified: what a run resumes from."""

    path: Path
    state: dict[str, Any]
    header: CheckpointHeader

    @property
    def buffer_path(self) -> Path:
        return buffer_file(self.path, self.header)


def _saved_buffer(checkpoint: Path, header: CheckpointHeader) -> Path | None:
    """The buffer file ``checkpoint`` was saved with; None when it was saved without one (a file
    beside it is not its) or its buffer is gone."""
    buffer = buffer_file(checkpoint, header)
    if (header.sealed and header.buffer_sha256 is None) or not buffer.is_file():
        return None
    return buffer


def has_resume_point(save_dir: str | Path) -> bool:
    """Whether a checkpoint of the run was saved with its buffer, which resume continues from (the
    best evaluation's policy, saved without one, is not). A checkpoint whose header cannot be
    read counts, so that resume says what is wrong with it rather than a restart replacing it."""
    for path in (Path(save_dir) / "ckpt").glob(f"*{CKPT_SUFFIX}"):
        try:
            if _saved_buffer(path, read_header(path, allow_unsealed=True)) is not None:
                return True
        except CheckpointError:
            return True
    return False


def latest_checkpoint(save_dir: str | Path, required: tuple[str, ...] = ("policy", "counters", "torch_rng"),
                      *, allow_unsealed: bool = False) -> ResumeUnit:
    """The unit a run continues from: of the checkpoints whose buffer is the one they were saved
    with (its name and SHA-256 are in the checkpoint's header), the one with the most train
    iterations (a resumed run's periodic saves outrank the earlier run's final one). Every
    checkpoint of the run is verified first (an unsealed one is refused unless
    ``allow_unsealed``; see :mod:`rlpipe.utils.checkpoint`). A checkpoint saved without a
    buffer, or whose buffer is missing or was replaced after it, is passed over; when no
    complete unit is left, one line says why."""
    ckpt = Path(save_dir) / "ckpt"
    seal = recorded_seal(save_dir)
    headers = {path: read_header(path, allow_unsealed=allow_unsealed, run_seal=seal)
               for path in sorted(ckpt.glob(f"*{CKPT_SUFFIX}"))}
    units, refused = [], []
    for path, header in headers.items():
        buffer = _saved_buffer(path, header)
        if buffer is None:
            continue
        if header.buffer_sha256 is not None and file_sha256(buffer) != header.buffer_sha256:
            refused.append((header.train_iter or 0, path))
            continue
        state, _ = read_checkpoint(path, required, allow_unsealed=allow_unsealed, run_seal=seal)
        units.append(ResumeUnit(path, state, header))
    if units:
        return max(units, key=lambda unit: unit.state["counters"]["train_iter"])
    if refused:
        path = max(refused)[1]
        raise CheckpointError(f"buffer file {buffer_file(path, headers[path])} does not match checkpoint {path} (its "
                              "SHA-256 differs: damaged, truncated, or saved at another moment); nothing to resume "
                              "from")
    raise CheckpointError(f"no checkpoint saved with its replay buffer in {ckpt}: nothing to resume")


@dataclass(frozen=True)
class SaveSettings:
    """What :class:`CkptSaver` saves beyond the seed's checkpoint of the policy, and how."""

    buffer_: Any | None = None
    """A replay buffer written beside the periodic and final checkpoints, so a run resumes whole."""
    keep_last: int | None = None
    """Keep only this many periodic checkpoints, the newest (None: all of them)."""
    reward_model: Any | None = None
    """A learned reward model saved in every checkpoint with the policy."""
    config: Mapping[str, Any] | None = None
    """The run's resolved config as plain data (JSON types), saved in every checkpoint."""
    run_id: str | None = None
    """The run's identity, in every checkpoint's header."""
    allow_unsealed: bool = False
    """The best evaluation of an earlier run may be read from an unsealed ``eval.pth.tar`` (see
    :mod:`rlpipe.utils.checkpoint`)."""

    def __post_init__(self) -> None:
        if self.keep_last is not None and self.keep_last < 1:
            raise ValueError(f"CkptSaver keep_last must be >= 1 or None, got {self.keep_last}")


@role_gated(Role.LEARNER)
class CkptSaver:
    """Save ``iteration_{train_iter}.pth.tar`` every ``train_freq`` train iterations,
    ``eval.pth.tar`` whenever the evaluation return beats the best so far (also the best of
    an earlier run in the same directory), and ``final.pth.tar`` once ``ctx.finish`` is set (if
    ``save_finish``): the seed's signature. rlpipe's runs add :class:`SaveSettings` (the replay
    buffer beside the periodic and final checkpoints, how many periodic ones to keep, the reward
    model, the config and the run id in every checkpoint).

    A save never destroys the last complete unit (a checkpoint and the buffer it names): the
    buffer is written under a name of its own, ``NAME.DIGEST.buffer.npz`` (the first 16 hex
    digits of its SHA-256, so a name taken again holds the same bytes), then the checkpoint,
    whose header names that file and its SHA-256, replaces ``NAME.pth.tar`` in one rename;
    only then are the older buffers removed (one buffer copy on disk: the newest checkpoint's).
    A crash at any point leaves the previous unit or the new one whole (:func:`latest_checkpoint`).

    Reads ``ctx.train_iter``, ``ctx.eval_value``, ``ctx.last_save_iter``; writes ``ctx.last_save_iter``.
    """

    def __init__(self, policy: Any, save_dir: str | Path, train_freq: int | None = None,
                 save_finish: bool = True, settings: SaveSettings = SaveSettings()) -> None:
        self._policy = policy
        self._settings = settings
        self._dir = Path(save_dir) / "ckpt"
        self._train_freq = train_freq
        self._save_finish = save_finish
        best = self._dir / BEST_CHECKPOINT
        self._best_eval = float("-inf")
        if best.is_file():
            state = load_checkpoint(best, allow_unsealed=settings.allow_unsealed, run_seal=recorded_seal(save_dir))
            self._best_eval = state["counters"]["last_eval_value"]

    def _save(self, ctx: OnlineRLContext, name: str, with_buffer: bool) -> None:
        path, settings = self._dir / name, self._settings
        state = checkpoint_state(self._policy, ctx, settings.reward_model, settings.config)
        if not (with_buffer and settings.buffer_ is not None):
            save_checkpoint(state, path, settings.run_id)
            return
        buffer, sha256 = self._save_buffer(settings.buffer_, name.removesuffix(CKPT_SUFFIX))
        save_checkpoint(state, path, settings.run_id, sha256, buffer.name)
        for old in self._dir.glob(f"*{BUFFER_SUFFIX}"):  # the new unit is complete: the older buffers go
            if old != buffer:
                old.unlink(missing_ok=True)

    def _save_buffer(self, buffer_: Any, stem: str) -> tuple[Path, str]:
        """Write the buffer to ``STEM.DIGEST.buffer.npz`` (via a hidden name that resume's cleaning of
        stray files removes after a crash); returns that path and the file's SHA-256."""
        self._dir.mkdir(parents=True, exist_ok=True)
        pending = self._dir / f".{stem}{BUFFER_SUFFIX}.pending"
        buffer_.save_data(str(pending))
        sha256 = file_sha256(pending)
        path = self._dir / f"{stem}.{sha256[:16]}{BUFFER_SUFFIX}"
        os.replace(pending, path)
        return path, sha256

    def __call__(self, ctx: OnlineRLContext) -> None:
        if self._train_freq is not None and ctx.train_iter - max(ctx.last_save_iter, 0) >= self._train_freq:
            ctx.last_save_iter = ctx.train_iter
            self._save(ctx, f"{PERIODIC_PREFIX}{ctx.train_iter}{CKPT_SUFFIX}", with_buffer=True)
            self._forget_old_periodic()
        if ctx.eval_value is not None and ctx.eval_value > self._best_eval:
            self._best_eval = ctx.eval_value
            self._save(ctx, BEST_CHECKPOINT, with_buffer=False)
        if ctx.finish and self._save_finish:
            self._save(ctx, FINAL_CHECKPOINT, with_buffer=True)

    def _forget_old_periodic(self) -> None:
        """Delete the periodic checkpoints beyond the newest ``keep_last`` (their buffers went when a
        newer one was saved)."""
        keep_last = self._settings.keep_last
        if keep_last is None:
            return
        iterations = {p: p.name.removeprefix(PERIODIC_PREFIX).removesuffix(CKPT_SUFFIX)
                      for p in self._dir.glob(f"{PERIODIC_PREFIX}*{CKPT_SUFFIX}")}
        periodic = sorted((p for p, it in iterations.items() if it.isdigit()), key=lambda p: int(iterations[p]))
        for old in periodic[: -keep_last]:
            old.unlink(missing_ok=True)
