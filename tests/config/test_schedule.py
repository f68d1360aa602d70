"""Schedules over env steps: how they are written, their values, and the config keys that take them."""
from __future__ import annotations

import math

import pytest
import yaml

from rlpipe.config import ConfigError, load_config, preset_names
from rlpipe.config.loader import dump_config
from rlpipe.config.schedule import Schedule, ScheduleError, as_schedule, parse_schedule


@pytest.mark.parametrize(("text", "expected"), [
    ("linear(3e-4, 1e-5)", Schedule("linear", 3e-4, 1e-5)),
    (" linear( 1.0 ,0.05, 10000 ) ", Schedule("linear", 1.0, 0.05, 10000)),
    ("exp(1.0, 0.05, 1e4)", Schedule("exp", 1.0, 0.05, 10000)),
    ("constant(0.1)", Schedule("constant", 0.1, 0.1)),
    ("0.25", Schedule("constant", 0.25, 0.25)),
])
def test_the_string_forms_parse(text, expected):
    assert parse_schedule(text) == expected


@pytest.mark.parametrize("schedule", [Schedule("linear", 3e-4, 1e-5), Schedule("exp", 1.0, 0.05, 500),
                                      Schedule("constant", 0.1, 0.1), Schedule("linear", 1e-3, 0.0, 123)])
def test_the_string_form_reads_back_to_the_same_schedule(schedule):
    assert parse_schedule(str(schedule)) == schedule


@pytest.mark.parametrize(("text", "message"), [
    ("linaer(1, 2)", "unknown schedule 'linaer'"),
    ("linear(1)", "linear takes start, end and an optional decay"),
    ("linear(1, 2, 3, 4)", "linear takes start, end"),
    ("linear(1, x)", "'x' is not a number"),
    ("linear(1, 0, 0.5)", "decay must be a positive whole number of env steps, got 0.5"),
    ("linear(1, 0, -3)", "decay must be a positive whole number"),
    ("constant(1, 2)", "constant takes one value"),
    ("linear(nan, 0)", "not a finite number"),
    ("fast", "cannot read schedule 'fast': write a number, 'linear(start, end)'"),
])
def test_bad_text_is_one_line_saying_what_is_wrong(text, message):
    with pytest.raises(ScheduleError, match=message.replace("(", r"\(").replace(")", r"\)")) as err:
        parse_schedule(text)
    assert "\n" not in str(err.value)


def test_mappings_and_numbers_are_schedules_too():
    assert as_schedule({"type": "linear", "start": 3e-4, "end": 1e-5, "decay": 5e4}) == Schedule(
        "linear", 3e-4, 1e-5, 50_000)
    assert as_schedule({"start": 1e-3}) == Schedule("linear", 1e-3, 1e-3)  # type defaults to linear
    assert as_schedule(3) == Schedule("constant", 3.0, 3.0)
    with pytest.raises(ScheduleError, match="unknown schedule key 'strat'"):
        as_schedule({"type": "linear", "strat": 1.0})
    with pytest.raises(ScheduleError, match="needs 'start'"):
        as_schedule({"type": "linear", "end": 1.0})
    with pytest.raises(ScheduleError, match="expected a number"):
        as_schedule(True)


def test_values_at_points():
    linear = Schedule("linear", 1.0, 0.1, 100)
    assert [linear.value(step) for step in (0, 50, 100, 1000)] == pytest.approx([1.0, 0.55, 0.1, 0.1])
    over_budget = Schedule("linear", 3e-4, 1e-5)
    assert over_budget.value(500, budget=1000) == pytest.approx(3e-4 + 0.5 * (1e-5 - 3e-4))
    assert over_budget.value(2000, budget=1000) == pytest.approx(1e-5)
    exp = Schedule("exp", 1.0, 0.1, 100)
    assert exp.value(100) == pytest.approx(0.1 + 0.9 * math.exp(-1))
    assert Schedule("constant", 0.2, 0.2).value(10**9) == 0.2
    with pytest.raises(ScheduleError, match="needs a decay length"):
        over_budget.value(0)


def test_epsilon_is_written_as_a_number_a_string_or_the_mapping():
    constant = load_config("cartpole-dqn", ["policy.other.eps=0.1"]).policy.other.eps
    assert (constant.type, constant.start, constant.end) == ("constant", 0.1, 0.1)
    text = load_config("cartpole-dqn", ["policy.other.eps=linear(1.0, 0.02)"]).policy.other.eps
    assert text.schedule == Schedule("linear", 1.0, 0.02)  # over run.max_env_step
    mapping = load_config("cartpole-dqn", ["policy.other.eps={type: linear, start: 1, end: 0.1}"]).policy.other.eps
    assert mapping.schedule == Schedule("linear", 1.0, 0.1, 10_000)  # the mapping's keys keep their defaults


def test_learning_rates_take_schedules_in_every_algorithm():
    dqn = load_config("cartpole-dqn", ["policy.learn.learning_rate=linear(1e-3, 1e-4, 5000)"]).policy.learn
    assert dqn.learning_rate == Schedule("linear", 1e-3, 1e-4, 5000)
    sac = load_config("pendulum-sac", ["policy.learn.learning_rate_actor=linear(3e-4, 0)",
                                       "policy.learn.learning_rate_q={type: exp, start: 1e-3, end: 1e-4, decay: 100}",
                                       "policy.learn.learning_rate_alpha=constant(2e-4)"]).policy.learn
    assert sac.learning_rate_actor == Schedule("linear", 3e-4, 0.0)
    assert sac.learning_rate_q == Schedule("exp", 1e-3, 1e-4, 100)
    assert sac.learning_rate_alpha == 2e-4  # a constant is its number


@pytest.mark.parametrize(("override", "message"), [
    ("policy.learn.learning_rate=linaer(1e-3, 1e-4)",
     "config key 'policy.learn.learning_rate': unknown schedule 'linaer' in 'linaer(1e-3, 1e-4)' (use constant, "
     "linear, exp)"),
    ("policy.learn.learning_rate=linear(0, 1e-4)",
     "config key 'policy.learn.learning_rate': a learning rate must be > 0 (a schedule's end >= 0), got "
     "'linear(0, 1e-4)'"),
    ("policy.learn.learning_rate={type: linear, strat: 1}",
     "config key 'policy.learn.learning_rate': unknown schedule key 'strat' (use type, start, end, decay)"),
    ("policy.other.eps=linear(1, 0.1, 0)",
     "config key 'policy.other.eps': cannot read schedule 'linear(1, 0.1, 0)': decay must be a positive whole "
     "number of env steps, got 0.0"),
])
def test_bad_schedule_text_is_one_line_naming_the_key(override, message):
    with pytest.raises(ConfigError) as err:
        load_config("cartpole-dqn", [override])
    assert str(err.value) == message


def test_a_schedule_of_a_key_the_algorithm_does_not_read_is_refused():
    with pytest.raises(ConfigError, match=r"'policy\.learn\.learning_rate' is not read by policy\.type 'sac'"):
        load_config("pendulum-sac", ["policy.learn.learning_rate=linear(1e-3, 1e-4)"])


@pytest.mark.parametrize("preset", preset_names())
def test_presets_and_their_saved_configs_load_as_before(preset, tmp_path):
    """Learning rates stay numbers but in the POPGym presets, which decay theirs, epsilon its
    mapping, and the saved config loads back to the same config."""
    cfg = load_config(preset)
    learn = cfg.policy.learn
    rates = [getattr(learn, key) for key in type(learn).model_fields if key.startswith("learning_rate")]
    if preset.startswith("popgym-"):
        assert learn.learning_rate == Schedule("linear", 5e-4, 5e-5)
    else:
        assert all(isinstance(rate, float) for rate in rates)
    assert cfg.policy.other.eps.type in ("exp", "linear")
    dump_config(cfg, tmp_path / "config.yaml")
    assert load_config(tmp_path / "config.yaml") == cfg


def test_a_schedule_is_saved_in_its_string_form_and_loads_back(tmp_path):
    cfg = load_config("cartpole-dqn", ["policy.learn.learning_rate=linear(1e-3, 1e-4)", "policy.other.eps=0.05"])
    dump_config(cfg, tmp_path / "config.yaml")
    saved = yaml.safe_load((tmp_path / "config.yaml").read_text())
    assert saved["policy"]["learn"]["learning_rate"] == "linear(0.001, 0.0001)"
    assert saved["policy"]["other"]["eps"]["type"] == "constant"
    assert load_config(tmp_path / "config.yaml") == cfg


def test_a_config_saved_before_schedules_loads_unchanged():
    saved = {"policy": {"learn": {"learning_rate": 0.0005},
                        "other": {"eps": {"type": "exp", "start": 0.9, "end": 0.02, "decay": 4000}},
                        "eval": {"evaluator": {"eval_freq": 300}}}}
    cfg = load_config(saved)
    assert cfg.policy.learn.learning_rate == 0.0005
    assert cfg.policy.other.eps.schedule == Schedule("exp", 0.9, 0.02, 4000)
    assert (cfg.policy.eval.evaluator.eval_freq, cfg.policy.eval.evaluator.eval_every_env_steps) == (300, None)


def test_evaluation_counts_train_iterations_or_env_steps_never_both():
    default = load_config("cartpole-dqn").policy.eval.evaluator
    assert (default.eval_freq, default.eval_every_env_steps) == (200, None)
    env_steps = load_config({"policy": {"eval": {"evaluator": {"eval_every_env_steps": 5000}}}}).policy.eval.evaluator
    assert (env_steps.eval_freq, env_steps.eval_every_env_steps) == (None, 5000)  # the default eval_freq steps aside
    with pytest.raises(ConfigError) as err:
        load_config("cartpole-dqn", ["policy.eval.evaluator.eval_every_env_steps=5000"])
    assert str(err.value) == ("config key 'policy.eval.evaluator': use exactly one of eval_freq (train iterations) "
                              "and eval_every_env_steps (env steps); set the other to null")
    with pytest.raises(ConfigError, match="use exactly one of eval_freq"):
        load_config({"policy": {"eval": {"evaluator": {"eval_freq": None}}}})
    switched = load_config("cartpole-dqn", ["policy.eval.evaluator.eval_freq=null",
                                            "policy.eval.evaluator.eval_every_env_steps=5000"])
    assert switched.policy.eval.evaluator.eval_every_env_steps == 5000
