"""``evaluate_run(run_dir)``: reload a finished run and measure its policy."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from rlpipe.config import load_config
from rlpipe.entry.build import REEVAL_SEED_OFFSET, make_policy, make_vector_env
from rlpipe.framework.middleware import evaluate_episodes
from rlpipe.utils.checkpoint import load_checkpoint


def best_checkpoint(run_dir: Path) -> Path:
    """The run's best-evaluation checkpoint, else its final one."""
    for name in ("eval.pth.tar", "final.pth.tar"):
        path = run_dir / "ckpt" / name
        if path.is_file():
            return path
    raise FileNotFoundError(f"no checkpoint in {run_dir / 'ckpt'} (expected eval.pth.tar or final.pth.tar)")


def evaluate_run(run_dir: Path, episodes: int | None = None, checkpoint: Path | None = None) -> dict[str, Any]:
    """Mean and spread of the return of ``run_dir``'s policy over ``episodes`` fresh episodes."""
    config_path = run_dir / "config.yaml"
    if not config_path.is_file():
        raise FileNotFoundError(f"{run_dir} is not a run directory (no config.yaml)")
    cfg = load_config(config_path)
    state = load_checkpoint(checkpoint or best_checkpoint(run_dir))
    policy = make_policy(cfg)
    policy.load_state_dict(state["policy"])
    with make_vector_env(cfg, cfg.env.evaluator_env_num, cfg.seed + REEVAL_SEED_OFFSET) as env:
        output = evaluate_episodes(policy.eval_mode, env, episodes or cfg.env.n_evaluator_episode)
    returns = output["episode_return"]
    return {
        "episodes": len(returns),
        "return_mean": float(np.mean(returns)),
        "return_std": float(np.std(returns)),
        "return_min": float(np.min(returns)),
        "return_max": float(np.max(returns)),
    }
