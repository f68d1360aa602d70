"""``evaluate_run(run_dir)``: reload a finished run and measure its policy."""
from __future__ import annotations

from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np

from rlpipe.config import load_config
from rlpipe.framework.middleware import evaluate_episodes
from rlpipe.recipes.build import make_policy
from rlpipe.recipes.envs import REEVAL_SEED_OFFSET, make_vector_env
from rlpipe.utils.checkpoint import load_checkpoint

CHECKPOINT_NAMES = {"best": "eval.pth.tar", "final": "final.pth.tar"}
"""The names ``rlpipe eval --checkpoint`` takes besides a path, and the files they stand for."""


def best_checkpoint(run_dir: Path) -> Path:
    """The run's best-evaluation checkpoint, else its final one."""
    for name in CHECKPOINT_NAMES.values():
        path = run_dir / "ckpt" / name
        if path.is_file():
            return path
    raise FileNotFoundError(f"no checkpoint in {run_dir / 'ckpt'} (expected eval.pth.tar or final.pth.tar)")


def resolve_checkpoint(run_dir: Path, checkpoint: str | Path | None = None) -> Path:
    """The checkpoint file meant by ``checkpoint``: None (best, else final), ``"best"``,
    ``"final"`` or a path."""
    if checkpoint is None:
        return best_checkpoint(run_dir)
    if str(checkpoint) in CHECKPOINT_NAMES:
        path = run_dir / "ckpt" / CHECKPOINT_NAMES[str(checkpoint)]
        if not path.is_file():
            raise FileNotFoundError(f"run {run_dir} has no {checkpoint} checkpoint ({path} is missing)")
        return path
    path = Path(checkpoint)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint file {path} (use best, final or a path to a .pth.tar)")
    return path


def evaluate_run(run_dir: Path, episodes: int | None = None, checkpoint: str | Path | None = None) -> dict[str, Any]:
    """Mean and spread of the return of ``run_dir``'s policy over ``episodes`` fresh episodes,
    from its ``checkpoint`` (see :func:`resolve_checkpoint`)."""
    config_path = run_dir / "config.yaml"
    if not config_path.is_file():
        raise FileNotFoundError(f"{run_dir} is not a run directory (no config.yaml)")
    cfg = load_config(config_path)
    state = load_checkpoint(resolve_checkpoint(run_dir, checkpoint))
    policy = make_policy(cfg)
    policy.load_state_dict(state["policy"])
    with closing(make_vector_env(cfg, cfg.env.evaluator_env_num, cfg.seed + REEVAL_SEED_OFFSET)) as env:
        output = evaluate_episodes(policy.eval_mode, env, episodes or cfg.env.n_evaluator_episode)
    returns = output["episode_return"]
    return {
        "episodes": len(returns),
        "return_mean": float(np.mean(returns)),
        "return_std": float(np.std(returns)),
        "return_min": float(np.min(returns)),
        "return_max": float(np.max(returns)),
    }
