"""``rlpipe.train(preset, overrides=..., run_dir=..., middleware=...)``: the CLI's path from Python."""
from __future__ import annotations

import dataclasses
import inspect
import json

import gymnasium as gym
import pytest

import rlpipe
from rlpipe.cli.main import _parser
from rlpipe.config import ConfigError
from rlpipe.entry.options import ArgumentError, TrainOptions
from rlpipe.entry.train import RunDirError
from rlpipe.recipes.pipeline import INSERTION_POINTS
from tests.run_checks import snapshot
from tests.tiny_run import TINY_RUN

TINY = TINY_RUN


def test_middleware_runs_at_its_insertion_point(tmp_path):
    seen: list[tuple[str, bool, bool]] = []

    def recorder(point):
        def record(ctx):  # what has run before it in this iteration
            seen.append((point, ctx.trajectories is not None, bool(ctx.train_output), ctx.eval_value is not None))
        return record

    summary = rlpipe.train("cartpole-dqn", overrides=TINY, run_dir=str(tmp_path / "run"),
                           middleware={point: [recorder(point)] for point in INSERTION_POINTS}).summary
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


def corridor() -> gym.Env:
    return gym.make("tests.corridor_env:Corridor-v0")


def test_an_env_factory_and_a_dict_of_overrides_train_an_agent(tmp_path):
    overrides = {"run.max_env_step": 200, "run.progress": False, "policy.collect.n_sample": 40,
                 "policy.learn.batch_size": 16, "policy.eval.evaluator.eval_freq": 10, "env.n_evaluator_episode": 2,
                 "env.evaluator_env_num": 2, "policy.model.encoder_hidden_size_list": [32, 32]}
    result = rlpipe.train("cartpole-dqn", env=corridor, overrides=overrides, run_dir=tmp_path / "run")
    assert result.run_dir == tmp_path / "run" and result.summary.env_step >= 200
    config = (result.run_dir / "config.yaml").read_text()
    assert "env_id: rlpipe-python/corridor-v0" in config and "- 32" in config
    obs, _ = corridor().reset(seed=0)
    assert result.agent().predict(obs) in (0, 1)


def test_an_env_id_replaces_the_presets(tmp_path):
    result = rlpipe.train("cartpole-dqn", env="tests.corridor_env:Corridor-v0", overrides=TINY, run_dir=tmp_path / "r")
    assert "env_id: tests.corridor_env:Corridor-v0" in (result.run_dir / "config.yaml").read_text()


def test_a_used_run_dir_needs_overwrite_or_resume(tmp_path):
    run_dir = tmp_path / "run"
    first = rlpipe.train("cartpole-dqn", overrides=TINY, run_dir=run_dir)
    with pytest.raises(RunDirError, match=r"already holds a run: pass overwrite=True \(--overwrite\) to start again "
                                          r"there, resume=True \(rlpipe resume\) to continue it, or another run_dir"):
        rlpipe.train("cartpole-dqn", overrides=TINY, run_dir=run_dir)
    again = rlpipe.train("cartpole-dqn", overrides=TINY, run_dir=run_dir, overwrite=True)
    assert again.summary.run_id != first.summary.run_id and again.summary.env_step == first.summary.env_step
    longer = rlpipe.train("cartpole-dqn", overrides=[*TINY, "run.max_env_step=400"], run_dir=run_dir, resume=True)
    assert longer.summary.run_id == again.summary.run_id and longer.summary.env_step >= 400


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"overrides": "seed=1"}, "overrides must be a list of 'key=value' strings or a dict, got the string 'seed=1'"),
    ({"overrides": [("seed", 1)]}, "overrides must be a list of 'key=value' strings or a dict; ('seed', 1) is not"),
    ({"env": 3}, "env must be a gymnasium id or a callable returning a gymnasium.Env, got 3"),
    ({"overwrite": True, "resume": True}, "pass overwrite=True or resume=True, not both"),
])
def test_wrong_arguments_are_named(tmp_path, kwargs, message):
    with pytest.raises(ArgumentError) as err:
        rlpipe.train("cartpole-dqn", run_dir=tmp_path / "run", **kwargs)
    assert message in str(err.value) and not (tmp_path / "run").exists()


def test_overwrite_removes_the_old_run_only_once_the_new_one_passed_its_checks(tmp_path):
    run_dir = tmp_path / "run"
    rlpipe.train("cartpole-dqn", overrides=TINY, run_dir=run_dir)
    before = snapshot(run_dir)
    with pytest.raises(ConfigError, match=r"env\.env_id"):
        rlpipe.train("cartpole-dqn", overrides=[*TINY, "env.env_id=NoSuchEnv-v0"], run_dir=run_dir, overwrite=True)
    assert snapshot(run_dir) == before


def test_the_command_line_and_python_take_the_same_options():
    parser = _parser()
    commands = {action.dest: action for action in parser._subparsers._group_actions}  # the subcommands
    cli = set()
    for name in ("train", "resume"):
        sub = commands["command"].choices[name]
        cli |= {action.dest for action in sub._actions if action.option_strings and action.dest != "help"}
    launcher_only = {"no_progress", "backend", "collectors", "address"}  # overrides of config keys, not options
    fields = {f.name for f in dataclasses.fields(TrainOptions)}
    assert cli - launcher_only <= fields
    assert fields <= set(inspect.signature(rlpipe.train).parameters)
