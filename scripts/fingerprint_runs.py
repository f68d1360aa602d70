"""Fingerprints of short seeded runs of every preset, to show that a refactor changes no result.

For each preset this trains a short run (``--steps`` env steps, small evaluations, a checkpoint
at the end) and hashes what must not change: every figure of ``metrics.jsonl`` except the
wall-clock ones, and every tensor of the final checkpoint (networks, optimizers, counters, RNG).

    .venv/bin/python scripts/fingerprint_runs.py --out before.json          # on the old code
    .venv/bin/python scripts/fingerprint_runs.py --out after.json --compare before.json

``--compare`` prints one line per preset (same / DIFFERENT) and exits 1 if any differs.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

from rlpipe.config import load_config, preset_names
from rlpipe.entry import train
from rlpipe.utils.checkpoint import load_checkpoint

WALL_CLOCK = ("time", "fps", "per_s", "wall", "_s")
"""Metric names that measure time, not results (a figure whose name ends so is left out)."""


def short_run(steps: int) -> list[str]:
    """Overrides that make a preset's run short but still exercise collection, learning and evaluation."""
    return [f"run.max_env_step={steps}", "run.progress=false", "run.stop_on_solve=false", "run.save_freq=100000",
            "env.n_evaluator_episode=2", "env.evaluator_env_num=2", "policy.eval.evaluator.eval_freq=50"]


def _tensor_bytes(value: Any) -> bytes:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().contiguous().numpy().tobytes() + str(value.dtype).encode()
    if isinstance(value, dict):
        return b"".join(str(k).encode() + _tensor_bytes(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0])))
    if isinstance(value, (list, tuple)):
        return b"".join(_tensor_bytes(v) for v in value)
    return repr(value).encode()


def warm_up_within(preset: str, steps: int) -> list[str]:
    """A random warm-up that ends inside the short run (presets with long warm-ups refuse a budget shorter
    than theirs), so that the run learns too."""
    warm_up = load_config(preset).policy.random_collect_size
    return [f"policy.random_collect_size={steps // 2}"] if warm_up > steps // 2 else []


def fingerprint(preset: str, steps: int, extra: list[str]) -> dict[str, str]:
    """Hashes of one short run's metrics (wall-clock figures left out) and final checkpoint."""
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        train(preset, run_dir, overrides=[*short_run(steps), *warm_up_within(preset, steps), *extra])
        rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
        kept = [{k: v for k, v in row.items() if not k.endswith(WALL_CLOCK)} for row in rows]
        metrics = hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()
        state = load_checkpoint(run_dir / "ckpt" / "final.pth.tar")
        state.pop("config", None)  # the config's dump may gain or lose default keys; the results may not
        checkpoint = hashlib.sha256(_tensor_bytes(state)).hexdigest()
    return {"metrics": metrics, "checkpoint": checkpoint, "rows": str(len(rows))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--compare", type=Path)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--presets", nargs="*", help="default: every preset")
    args = parser.parse_args()
    figures: dict[str, Any] = {}
    for preset in args.presets or preset_names():
        try:
            figures[preset] = fingerprint(preset, args.steps, [])
        except Exception as err:  # a preset whose extra is not installed: say so, go on
            figures[preset] = {"error": f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"}
        print(preset, figures[preset], flush=True)
    args.out.write_text(json.dumps(figures, indent=1, sort_keys=True))
    if args.compare is None:
        return 0
    before = json.loads(args.compare.read_text())
    differ = 0
    for preset, figure in figures.items():
        same = before.get(preset) == figure
        differ += not same
        print(f"{preset}: {'same' if same else 'DIFFERENT'}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
