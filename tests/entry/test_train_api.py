"""``rlpipe.train(preset, overrides=..., run_dir=..., middleware=...)``: the CLI's path from Python."""
from __future__ import annotations

import json

import pytest

import rlpipe
from rlpipe.config import ConfigError
from rlpipe.recipes.pipeline import INSERTION_POINTS
from tests.tiny_run import TINY_RUN

TINY = TINY_RUN


def test_middleware_runs_at_its_insertion_point(tmp_path):
    seen: list[tuple[str, bool, bool]] = []

    def recorder(point):
        def record(ctx):  # what has run before it in this iteration
            seen.append((point, ctx.trajectories is not None, bool(ctx.train_output), ctx.eval_value is not None))
        return record

    summary = rlpipe.train("cartpole-dqn", overrides=TINY, run_dir=str(tmp_path / "run"),
                           middleware={point: [recorder(point)] for point in INSERTION_POINTS})
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["env_step"] == summary.env_step
    first_iteration = seen[: len(INSERTION_POINTS)]
    assert first_iteration == [  # (point, collected, trained, evaluated)
        ("before_collect", False, False, False),
        ("after_collect", True, False, False),
        ("before_learn", True, False, False),
        ("after_learn", True, True, False),
        ("before_evaluate", True, True, False),
        ("after_evaluate", True, True, True),  # the evaluator runs at the first iteration
    ]
    assert len(seen) == len(INSERTION_POINTS) * (summary.env_step // 40)  # every iteration


def test_an_unknown_insertion_point_is_one_line(tmp_path):
    with pytest.raises(ConfigError, match="unknown middleware insertion point 'after_lunch' \\(use before_collect"):
        rlpipe.train("cartpole-dqn", overrides=TINY, run_dir=tmp_path / "run", middleware={"after_lunch": []})
    assert not (tmp_path / "run").exists()
