"""Atari-100k results of ``atari100k-der`` runs next to Data-efficient Rainbow's published scores.

For each run directory (``rlpipe train atari100k-der env.env_id=ALE/<Game>-v5 seed=S --run-dir D``)
the score is the mean return of the final policy over 100 whole-game episodes, the protocol of
Dopamine's ``labs/atari_100k`` (``MaxEpisodeEvalRunner.num_eval_episodes = 100``). It is read from
``D/atari100k_eval.json``; ``--evaluate`` measures it first (``rlpipe eval D --checkpoint final
--episodes 100``) and writes that file.

Printed per game: the raw score (mean over the game's runs), the human-normalised score
``(score - random) / (human - random)``, and DER's published score and its normalisation; then
the mean, median and interquartile mean (IQM) of the normalised scores over the games run, for
the runs and for DER on the same games. The IQM pools every run's normalised score (games x
seeds) and averages the middle 50%, as rliable does (Agarwal et al. 2021).

Sources: random and human scores are Dopamine's ``labs/atari_100k/normalization_utils.py``
(the published constants); DER's per-game scores are van Hasselt et al. (2019), "When to use
parametric models in reinforcement learning?", as tabulated in Schwarzer et al. (2021, SPR),
Table 4.

Usage: ``python benchmarks/atari100k.py RUN_DIR [RUN_DIR ...] [--evaluate]``. The last line
printed is JSON.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
from collections import defaultdict
from pathlib import Path

import numpy as np

EVAL_FILE = "atari100k_eval.json"
EVAL_EPISODES = 100

# game: (random, human, DER)
SCORES: dict[str, tuple[float, float, float]] = {
    "alien": (227.8, 7127.7, 739.9),
    "amidar": (5.8, 1719.5, 188.6),
    "assault": (222.4, 742.0, 431.2),
    "asterix": (210.0, 8503.3, 470.8),
    "bankheist": (14.2, 753.1, 51.0),
    "battlezone": (2360.0, 37187.5, 10124.6),
    "boxing": (0.1, 12.1, 0.2),
    "breakout": (1.7, 30.5, 1.9),
    "choppercommand": (811.0, 7387.8, 861.8),
    "crazyclimber": (10780.5, 35829.4, 16185.3),
    "demonattack": (152.1, 1971.0, 508.0),
    "freeway": (0.0, 29.6, 27.9),
    "frostbite": (65.2, 4334.7, 866.8),
    "gopher": (257.6, 2412.5, 349.5),
    "hero": (1027.0, 30826.4, 6857.0),
    "jamesbond": (29.0, 302.8, 301.6),
    "kangaroo": (52.0, 3035.0, 779.3),
    "krull": (1598.0, 2665.5, 2851.5),
    "kungfumaster": (258.5, 22736.3, 14346.1),
    "mspacman": (307.3, 6951.6, 1204.1),
    "pong": (-20.7, 14.6, -19.3),
    "privateeye": (24.9, 69571.3, 97.8),
    "qbert": (163.9, 13455.0, 1152.9),
    "roadrunner": (11.5, 7845.0, 9600.0),
    "seaquest": (68.4, 42054.7, 354.1),
    "upndown": (533.4, 11693.2, 2877.4),
}
"""The 26 games of Atari-100k: random and human scores (Dopamine), DER's published mean score."""


def game_of(env_id: str) -> str:
    """``ALE/KungFuMaster-v5`` -> ``kungfumaster``; a one-line error for a game outside Atari-100k."""
    name = env_id.split("/")[-1].split("-")[0]
    game = re.sub(r"[^a-z]", "", name.lower())
    if game not in SCORES:
        raise SystemExit(f"env.env_id '{env_id}' is not one of the 26 Atari-100k games")
    return game


def normalised(score: float, game: str) -> float:
    """The human-normalised score: 0 is random play, 1 is the human reference."""
    random, human, _ = SCORES[game]
    return (score - random) / (human - random)


def iqm(values: list[float]) -> float:
    """Mean of the middle 50% (25% trimmed from each end, as ``scipy.stats.trim_mean(x, 0.25)``)."""
    ordered = np.sort(np.asarray(values, dtype=float))
    cut = int(0.25 * len(ordered))
    return float(ordered[cut:len(ordered) - cut].mean())


def aggregate(per_game: dict[str, float], pooled: list[float]) -> dict[str, float]:
    """Mean and median over games of ``per_game`` normalised scores, IQM over the ``pooled`` runs."""
    scores = list(per_game.values())
    return {"mean": statistics.fmean(scores), "median": statistics.median(scores), "iqm": iqm(pooled)}


def run_score(run_dir: Path, evaluate: bool) -> tuple[str, float]:
    """The run's game and its 100-episode score (measured and saved first with ``evaluate``)."""
    from rlpipe.config import load_config

    config_path = run_dir / "config.yaml"
    if not config_path.is_file():
        raise SystemExit(f"{run_dir} is not a run directory (no config.yaml)")
    game = game_of(load_config(config_path).env.env_id)
    eval_path = run_dir / EVAL_FILE
    if evaluate:
        from rlpipe.entry.evaluate import evaluate_run

        eval_path.write_text(json.dumps(evaluate_run(run_dir, EVAL_EPISODES, "final")))
    if not eval_path.is_file():
        raise SystemExit(f"{eval_path} is missing: run with --evaluate (100 episodes of the final policy)")
    return game, float(json.loads(eval_path.read_text())["return_mean"])


def report(scores: dict[str, list[float]]) -> dict[str, object]:
    """The per-game table and the aggregates, printed; returned as a dict."""
    ours = {game: statistics.fmean(runs) for game, runs in scores.items()}
    ours_norm = {game: normalised(score, game) for game, score in ours.items()}
    der_norm = {game: normalised(SCORES[game][2], game) for game in ours}
    pooled = [normalised(score, game) for game, runs in scores.items() for score in runs]
    print(f"{'game':<16}{'runs':>5}{'score':>12}{'HNS':>9}{'DER':>12}{'DER HNS':>9}")
    for game in sorted(ours):
        print(f"{game:<16}{len(scores[game]):>5}{ours[game]:>12.1f}{ours_norm[game]:>9.3f}"
              f"{SCORES[game][2]:>12.1f}{der_norm[game]:>9.3f}")
    ours_agg, der_agg = aggregate(ours_norm, pooled), aggregate(der_norm, list(der_norm.values()))
    for name in ("mean", "median", "iqm"):
        print(f"{name:<16}{'':>5}{'':>12}{ours_agg[name]:>9.3f}{'':>12}{der_agg[name]:>9.3f}")
    return {"games": {g: {"runs": scores[g], "score": ours[g], "hns": ours_norm[g], "der": SCORES[g][2],
                          "der_hns": der_norm[g]} for g in sorted(ours)}, "ours": ours_agg, "der": der_agg}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dirs", type=Path, nargs="+")
    parser.add_argument("--evaluate", action="store_true", help="measure each run's 100-episode score first")
    args = parser.parse_args(argv)
    scores: dict[str, list[float]] = defaultdict(list)
    for run_dir in args.run_dirs:
        game, score = run_score(run_dir, args.evaluate)
        scores[game].append(score)
    print(json.dumps(report(dict(scores))))


if __name__ == "__main__":
    main()
