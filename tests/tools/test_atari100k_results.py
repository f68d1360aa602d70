"""benchmarks/atari100k.py: per-game raw and human-normalised scores and their aggregates, next to DER's."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlpipe.config import dump_config, load_config
from tests.benchmark_scripts import benchmark_module

atari100k = benchmark_module("atari100k")


def fake_run(tmp_path: Path, name: str, game: str, score: float) -> Path:
    run_dir = tmp_path / name
    run_dir.mkdir()
    dump_config(load_config("atari100k-der", [f"env.env_id=ALE/{game}-v5"]), run_dir / "config.yaml")
    (run_dir / atari100k.EVAL_FILE).write_text(json.dumps({"return_mean": score, "episodes": 100}))
    return run_dir


def test_der_on_freeway_roadrunner_and_kangaroo_is_about_0_80(tmp_path, capsys):
    runs = [fake_run(tmp_path, "f", "Freeway", 27.9), fake_run(tmp_path, "r", "RoadRunner", 9600.0),
            fake_run(tmp_path, "k", "Kangaroo", 779.3)]
    atari100k.main([str(r) for r in runs])
    result = json.loads(capsys.readouterr().out.splitlines()[-1])
    # (27.9 - 0) / 29.6, (9600 - 11.5) / (7845 - 11.5), (779.3 - 52) / (3035 - 52)
    expected = [27.9 / 29.6, 9588.5 / 7833.5, 727.3 / 2983.0]
    assert [result["games"][g]["hns"] for g in ("freeway", "roadrunner", "kangaroo")] == pytest.approx(expected)
    assert result["ours"]["mean"] == pytest.approx(sum(expected) / 3) == pytest.approx(result["der"]["mean"])
    assert result["ours"]["median"] == pytest.approx(27.9 / 29.6)


def test_seeds_of_a_game_average_and_the_iqm_pools_runs(tmp_path, capsys):
    runs = [fake_run(tmp_path, "p0", "Pong", -20.7), fake_run(tmp_path, "p1", "Pong", 14.6),
            fake_run(tmp_path, "b0", "Boxing", 0.1), fake_run(tmp_path, "b1", "Boxing", 12.1)]
    atari100k.main([str(r) for r in runs])
    result = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert result["games"]["pong"]["score"] == pytest.approx(-3.05) and result["games"]["pong"]["hns"] == 0.5
    # pooled normalised scores [0, 1, 0, 1]: the middle two are 0 and 1
    assert result["ours"]["iqm"] == pytest.approx(0.5)


def test_the_published_der_aggregates_over_the_26_games():
    # van Hasselt et al. (2019) report a mean of 0.285 and a median of 0.161
    der = {game: atari100k.normalised(scores[2], game) for game, scores in atari100k.SCORES.items()}
    assert len(der) == 26
    agg = atari100k.aggregate(der, list(der.values()))
    assert agg["mean"] == pytest.approx(0.285, abs=5e-4) and agg["median"] == pytest.approx(0.161, abs=5e-4)


def test_a_run_without_its_evaluation_and_a_game_outside_the_benchmark_are_one_line_errors(tmp_path):
    run_dir = fake_run(tmp_path, "f", "Freeway", 1.0)
    (run_dir / atari100k.EVAL_FILE).unlink()
    with pytest.raises(SystemExit, match=r"atari100k_eval\.json is missing: run with --evaluate"):
        atari100k.main([str(run_dir)])
    with pytest.raises(SystemExit, match="'ALE/Tetris-v5' is not one of the 26 Atari-100k games"):
        atari100k.game_of("ALE/Tetris-v5")
