"""``evaluate_run(run_dir)``: reload a finished run and measure its policy."""
from __future__ import annotations

import logging
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlpipe.config import Config, ConfigError, load_config
from rlpipe.entry.video import record_episodes, video_writer
from rlpipe.framework.middleware import BEST_CHECKPOINT, FINAL_CHECKPOINT, evaluate_episodes
from rlpipe.policy import Policy
from rlpipe.recipes.build import acting_threads, make_policy
from rlpipe.recipes.envs import REEVAL_SEED_OFFSET, make_vector_env
from rlpipe.utils.checkpoint import CheckpointError, load_checkpoint, required_seal
from rlpipe.utils.metrics import read_metrics

logger = logging.getLogger(__name__)

CHECKPOINT_NAMES = {"best": BEST_CHECKPOINT, "final": FINAL_CHECKPOINT}
"""The names ``rlpipe eval --checkpoint`` takes besides a path, and the files they stand for."""


@dataclass(frozen=True)
class ChosenCheckpoint:
    """The checkpoint a run stands for, and why that one (one line)."""

    path: Path
    reason: str


def default_checkpoint(run_dir: Path, allow_unsealed: bool = False) -> ChosenCheckpoint:
    """The checkpoint a run stands for: its best evaluation's when that evaluation came after training
    began, else its final one. "After training began" means after the run's first evaluation, which
    is taken when learning starts, of a network that has made at most one iteration's updates: a run
    that evaluated only then (or whose learning only made it worse) would otherwise stand for its
    untrained network. Without ``metrics.jsonl`` the best counts when it came after any update."""
    best, final = (run_dir / "ckpt" / name for name in CHECKPOINT_NAMES.values())
    if best.is_file():
        counters = load_checkpoint(best, allow_unsealed=allow_unsealed,
                                   run_seal=required_seal(best, run_dir)).get("counters", {})
        at = f"at env step {counters.get('env_step', '?')}, train iteration {counters.get('train_iter', '?')}"
        if counters.get("train_iter", 1) > _first_evaluation_iter(run_dir) or not final.is_file():
            return ChosenCheckpoint(best, f"the best evaluation's ({counters.get('last_eval_value')} {at})")
        return ChosenCheckpoint(final, f"the final one: the best evaluation ({at}) was the first, taken as "
                                "learning began")
    if final.is_file():
        return ChosenCheckpoint(final, "the final one (no evaluation was saved)")
    raise FileNotFoundError(f"no checkpoint in {run_dir / 'ckpt'} (expected eval.pth.tar or final.pth.tar)")


def _first_evaluation_iter(run_dir: Path) -> int:
    """The train iteration of the run's first evaluation (0 when its metrics cannot be read)."""
    try:
        return next((int(r["train_iter"]) for r in read_metrics(run_dir) if r.get("kind") == "eval"), 0)
    except (OSError, ValueError, KeyError):
        return 0


def resolve_checkpoint(run_dir: Path, checkpoint: str | Path | None = None, allow_unsealed: bool = False) -> Path:
    """The checkpoint file meant by ``checkpoint``: None (:func:`default_checkpoint`), ``"best"``,
    ``"final"`` or a path."""
    if checkpoint is None:
        chosen = default_checkpoint(run_dir, allow_unsealed)
        logger.info("%s: took %s", run_dir, chosen.reason)
        return chosen.path
    if str(checkpoint) in CHECKPOINT_NAMES:
        path = run_dir / "ckpt" / CHECKPOINT_NAMES[str(checkpoint)]
        if not path.is_file():
            raise FileNotFoundError(f"run {run_dir} has no {checkpoint} checkpoint ({path} is missing)")
        return path
    path = Path(checkpoint)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint file {path} (use best, final or a path to a .pth.tar)")
    return path


DEVICES = ("auto", "cpu", "cuda")
"""Where a loaded policy acts: ``auto`` on the GPU when its run trained there and one is here, else
on the CPU (a run trained on a GPU loads on a laptop); ``cpu``; ``cuda`` (one line when there is none)."""


def acting_config(cfg: Config, device: str) -> Config:
    """``cfg`` with ``policy.cuda`` set for acting on ``device`` (one of :data:`DEVICES`)."""
    if device not in DEVICES:
        raise ValueError(f"device '{device}' is not one of {', '.join(DEVICES)}")
    cuda = {"auto": cfg.policy.cuda and torch.cuda.is_available(), "cpu": False, "cuda": True}[device]
    if cuda == cfg.policy.cuda:
        return cfg
    return cfg.model_copy(update={"policy": cfg.policy.model_copy(update={"cuda": cuda})})


def load_policy(cfg: Config, state: dict[str, Any], path: Path, device: str = "auto") -> Policy:
    """The policy ``cfg`` describes with the weights of checkpoint ``state`` (read from ``path``),
    on ``device`` (:data:`DEVICES`); one line when they do not fit (other network sizes or kinds),
    never torch's many-line report."""
    policy = make_policy(acting_config(cfg, device))
    try:
        policy.load_state_dict(state["policy"])
    except (RuntimeError, KeyError, ValueError, TypeError) as err:
        reason = " ".join(str(err).split())
        raise CheckpointError(f"checkpoint {path} does not fit the config it is loaded with "
                              f"(policy.type {cfg.policy.type}, env {cfg.env.env_id}): {reason[:240]}") from None
    return policy


def _network(cfg: Config) -> tuple[Any, ...]:
    """What decides a checkpoint's networks and the env they act in."""
    return cfg.policy.type, cfg.env.env_id, cfg.policy.model.model_dump(mode="json")


def checkpoint_config(run_cfg: Config, state: dict[str, Any], path: Path) -> Config:
    """The config to rebuild checkpoint ``state``'s policy with: the run's, unless the checkpoint
    carries a config of its own with other networks or another env (a checkpoint of another
    run or preset), which then is used, with one warning line saying so. A config this rlpipe
    cannot read (an older checkpoint's) leaves the run's."""
    if "config" not in state:
        return run_cfg
    try:
        own = load_config(state["config"])
    except ConfigError:
        return run_cfg
    if _network(own) == _network(run_cfg):
        return run_cfg
    logger.warning("checkpoint %s was saved by a run of another config (policy.type %s, env %s, other network "
                   "sizes or env): evaluated with its own config", path, own.policy.type, own.env.env_id)
    return own


def evaluate_run(run_dir: Path, episodes: int | None = None, checkpoint: str | Path | None = None,
                 allow_unsealed: bool = False, video: Path | None = None) -> dict[str, Any]:
    """Mean and spread of the return of ``run_dir``'s policy over ``episodes`` fresh episodes,
    from its ``checkpoint`` (see :func:`resolve_checkpoint`). A checkpoint of another config is
    evaluated with its own (:func:`checkpoint_config`). The checkpoint must be sealed, and signed
    when the run's (or the file's own run's) checkpoints are (see :mod:`rlpipe.utils.checkpoint`),
    unless ``allow_unsealed`` lets an unsealed one load unverified. With ``video`` (a ``.gif`` or
    ``.mp4`` path) the episodes are played one at a time in one env and recorded there
    (:mod:`rlpipe.entry.video`)."""
    writer = None if video is None else video_writer(video)  # a wrong suffix fails before anything loads
    config_path = run_dir / "config.yaml"
    if not config_path.is_file():
        raise FileNotFoundError(f"{run_dir} is not a run directory (no config.yaml)")
    run_cfg = load_config(config_path)
    path = resolve_checkpoint(run_dir, checkpoint, allow_unsealed)
    state = load_checkpoint(path, allow_unsealed=allow_unsealed, run_seal=required_seal(path, run_dir))
    cfg = checkpoint_config(run_cfg, state, path)
    policy = load_policy(cfg, state, path)
    n_episode = episodes or cfg.env.n_evaluator_episode
    with acting_threads(cfg):
        if writer is not None:
            output = record_episodes(cfg, policy, n_episode, cfg.seed + REEVAL_SEED_OFFSET, writer)
        else:
            with closing(make_vector_env(cfg, cfg.env.evaluator_env_num, cfg.seed + REEVAL_SEED_OFFSET)) as env:
                output = evaluate_episodes(policy.eval_mode, env, n_episode, cfg.policy.eval.eps)
    returns = output["episode_return"]
    video_fields = {} if video is None else {"video": str(video), "video_frames": output["frames"]}
    return {
        "checkpoint": str(path),
        "episodes": len(returns),
        "return_mean": float(np.mean(returns)),
        "return_std": float(np.std(returns)),
        "return_min": float(np.min(returns)),
        "return_max": float(np.max(returns)),
        **video_fields,
    }
