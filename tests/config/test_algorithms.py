"""The table of algorithms and the per-algorithm validation it drives."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import get_args

import pytest
from pydantic import BaseModel

from rlpipe.config import ConfigError, dump_config, load_config, preset_names
from rlpipe.config.algorithms import (
    ALGORITHM_KEYS,
    ALGORITHM_SECTIONS,
    ALGORITHMS,
    SHARED_KEYS,
    ActionKind,
    Exploration,
    TargetUpdate,
    learning_rate_keys,
)
from rlpipe.config.describe import describe_config
from rlpipe.config.schema import PolicyConfig

ROOT = Path(__file__).resolve().parents[2]


def section_keys() -> set[str]:
    """Every algorithm-dependent key (under ``policy.``) of the schema: those of the sections, and
    the single keys, each of which must exist."""
    keys = set()
    for section in ALGORITHM_SECTIONS:
        model: type[BaseModel] = PolicyConfig
        for part in section.split("."):
            model = model.model_fields[part].annotation
        keys |= {f"{section}.{name}" for name in model.model_fields}
    for key in ALGORITHM_KEYS:
        model = PolicyConfig
        *path, name = key.split(".")
        for part in path:
            model = model.model_fields[part].annotation
        assert name in model.model_fields, key
        keys.add(key)
    return keys


def test_every_policy_type_has_a_row_and_nothing_else_does():
    assert get_args(PolicyConfig.model_fields["type"].annotation) == tuple(ALGORITHMS)
    assert set(ALGORITHMS) == {"dqn", "c51", "qrdqn", "sac", "td3", "ddpg", "crossq", "td3_bc", "iql", "cql", "bc",
                               "r2d2"}
    assert [name for name, row in ALGORITHMS.items() if row.sequences] == ["r2d2"]
    assert all(name == row.name for name, row in ALGORITHMS.items())


def test_every_key_a_row_reads_exists_in_the_schema_and_every_key_is_read_by_some_row():
    schema = section_keys()
    for row in ALGORITHMS.values():
        assert set(row.keys) <= schema, row.name
        assert len(set(row.keys)) == len(row.keys), row.name  # each key once: shared, own, target, exploration
    assert set(SHARED_KEYS) <= schema
    assert set().union(*(row.keys for row in ALGORITHMS.values())) == schema  # no key nobody reads


def test_rows_state_what_each_algorithm_is():
    dqn, sac, td3, ddpg, crossq = (ALGORITHMS[name] for name in ("dqn", "sac", "td3", "ddpg", "crossq"))
    assert dqn.action_kind is ActionKind.DISCRETE
    assert all(row.action_kind is ActionKind.CONTINUOUS for row in (sac, td3, ddpg, crossq))
    assert [row.exploration for row in (dqn, sac, td3, ddpg, crossq)] == [
        Exploration.EPSILON, Exploration.SAMPLING, Exploration.GAUSSIAN_NOISE, Exploration.GAUSSIAN_NOISE,
        Exploration.SAMPLING]
    assert dqn.target_update is TargetUpdate.HARD_OR_SOFT and sac.target_update is TargetUpdate.SOFT
    assert not crossq.target_networks and all(row.target_networks for row in (dqn, sac, td3, ddpg))
    assert dqn.learning_rate_keys == ("policy.learn.learning_rate",)
    assert td3.learning_rate_keys == ("policy.learn.learning_rate_actor", "policy.learn.learning_rate_q")
    assert crossq.reads("policy.learn.actor_update_freq") and not sac.reads("policy.learn.actor_update_freq")
    assert dqn.reads("policy.other.eps.end") and not td3.reads("policy.other.eps.end")
    assert sac.reads("seed") and sac.reads("policy.discount_factor")  # outside the algorithm's sections


def test_the_config_layer_imports_no_policy():
    code = "import sys, rlpipe.config; print(sorted(m for m in sys.modules if m.startswith('rlpipe.policy')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(("source", "override", "message"), [
    ("pendulum-sac", "policy.learn.learning_rate=1e-2",
     "config key 'policy.learn.learning_rate' is not read by policy.type 'sac': use policy.learn.learning_rate_actor"
     " / policy.learn.learning_rate_q / policy.learn.learning_rate_alpha"),
    ("hopper-crossq", "policy.learn.target_update_freq=10",
     "config key 'policy.learn.target_update_freq' is not read by policy.type 'crossq', which has no target "
     "networks: remove it"),
    ("pendulum-sac", "policy.learn.target_update_freq=10",
     "config key 'policy.learn.target_update_freq' is not read by policy.type 'sac': use policy.learn.target_theta"),
    ("pendulum-td3", "policy.learn.learning_rate_alpha=1e-3",
     "config key 'policy.learn.learning_rate_alpha' is not read by policy.type 'td3': remove it (it is read by "
     "sac, cql, crossq)"),
    ("cartpole-dqn", "policy.learn.learning_rate_q=1e-2",
     "config key 'policy.learn.learning_rate_q' is not read by policy.type 'dqn': use policy.learn.learning_rate"),
    ("cartpole-dqn", "policy.collect.noise_sigma=0.3",
     "config key 'policy.collect.noise_sigma' is not read by policy.type 'dqn', which explores epsilon-greedily: "
     "use policy.other.eps"),
    ("pendulum-ddpg", "policy.other.eps.end=0.1",
     "config key 'policy.other.eps.end' is not read by policy.type 'ddpg', which explores with Gaussian action "
     "noise: use policy.collect.noise_sigma"),
    ("pendulum-sac", "policy.collect.noise_sigma=0.3",
     "config key 'policy.collect.noise_sigma' is not read by policy.type 'sac', which explores by sampling its "
     "own actions: remove it"),
    ("pendulum-sac", "policy.eval.eps=0.05",
     "config key 'policy.eval.eps' is not read by policy.type 'sac': remove it (it is read by dqn, c51, qrdqn, "
     "r2d2)"),
    ("pendulum-td3", "policy.eval.eps=0.05",
     "config key 'policy.eval.eps' is not read by policy.type 'td3': remove it (it is read by dqn, c51, qrdqn, "
     "r2d2)"),
    ("hopper-medium-bc", "policy.learn.reward_scale=2",
     "config key 'policy.learn.reward_scale' is not read by policy.type 'bc': remove it (it is read by dqn, c51, "
     "qrdqn, r2d2, sac, td3, ddpg, td3_bc, iql, cql, crossq)"),
    ("pendulum-sac", "policy.model.dueling=true",
     "config key 'policy.model.dueling' is not read by policy.type 'sac': remove it (it is read by dqn, c51, "
         "qrdqn, r2d2)"),
])
def test_a_key_the_algorithm_does_not_read_is_one_line_naming_key_algorithm_and_remedy(source, override, message):
    with pytest.raises(ConfigError) as err:
        load_config(source, [override])
    assert str(err.value) == message


def test_a_yaml_file_or_dict_setting_an_unread_key_is_refused_too(tmp_path):
    path = tmp_path / "sac.yaml"
    path.write_text("policy:\n  type: sac\n  learn:\n    target_theta: 0.005\n    double_q: false\n")
    with pytest.raises(ConfigError, match=r"^config key 'policy\.learn\.double_q' is not read by policy\.type 'sac'"):
        load_config(path)
    with pytest.raises(ConfigError, match=r"^config key 'policy\.learn\.noise_clip' is not read by policy\.type 'ddpg"):
        load_config({"policy": {"type": "ddpg", "learn": {"target_theta": 0.005, "noise_clip": 0.3}}})


def test_switching_the_type_of_a_preset_names_the_first_key_the_new_algorithm_ignores():
    with pytest.raises(ConfigError, match=r"'policy\.learn\.target_update_freq' is not read by policy\.type 'td3'"):
        load_config("cartpole-dqn", ["policy.type=td3"])


def test_defaults_and_nulls_are_not_settings():
    """A key at its default or at None changes nothing: a saved config, which lists every key, loads back."""
    cfg = load_config("pendulum-sac")  # its dump has learning_rate at the default, target_update_freq at None
    assert load_config(cfg.model_dump()) == cfg
    assert load_config("pendulum-sac", ["policy.learn.learning_rate=1e-3"]).policy.learn.learning_rate == 1e-3
    assert load_config("hopper-crossq", ["policy.learn.target_update_freq=null"]).policy.learn.target_theta is None


def test_every_preset_sets_only_keys_its_algorithm_reads_and_round_trips(tmp_path):
    for name in preset_names():
        cfg = load_config(name)
        dump_config(cfg, tmp_path / f"{name}.yaml")
        assert load_config(tmp_path / f"{name}.yaml") == cfg, name


def test_the_unread_key_error_goes_through_the_console_script():
    script = Path(sys.executable).parent / "rlpipe"
    for argv, key, policy_type in (
        (["pendulum-sac", "policy.learn.learning_rate=1e-2"], "policy.learn.learning_rate", "sac"),
        (["hopper-crossq", "policy.learn.target_update_freq=10"], "policy.learn.target_update_freq", "crossq"),
    ):
        out = subprocess.run([str(script), "train", *argv], capture_output=True, text=True, timeout=120,
                             env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
        err = out.stderr.strip()
        assert out.returncode == 2 and "\n" not in err and "Traceback" not in err
        assert f"config key '{key}' is not read by policy.type '{policy_type}'" in err


def test_config_show_lists_only_the_keys_the_algorithm_reads():
    shown = {info.key for info in describe_config(load_config("hopper-crossq"))}
    assert {"policy.learn.actor_update_freq", "policy.learn.learning_rate_alpha", "policy.model.obs_norm",
            "policy.learn.adam_betas", "policy.discount_factor", "seed"} <= shown
    assert not shown & {"policy.learn.target_update_freq", "policy.learn.target_theta", "policy.learn.learning_rate",
                        "policy.model.dueling", "policy.collect.noise_sigma", "policy.other.eps.end"}
    dqn = {info.key for info in describe_config(load_config("cartpole-dqn"))}
    assert {"policy.learn.learning_rate", "policy.learn.target_update_freq", "policy.other.eps.decay"} <= dqn
    assert "policy.learn.precision" in dqn  # every policy reads it
    assert not dqn & {"policy.learn.learning_rate_actor", "policy.model.obs_norm"}


def test_the_evaluation_epsilon_is_read_by_the_dqn_family_noisy_networks_included():
    assert load_config("cartpole-dqn", ["policy.eval.eps=0.05"]).policy.eval.eps == 0.05
    assert load_config("cartpole-c51", ["policy.model.noisy=true", "policy.eval.eps=0.001"]).policy.eval.eps == 0.001
    assert load_config("pendulum-sac", ["policy.eval.eps=0"]).policy.eval.eps == 0.0  # the default: no setting
    assert {load_config(name).policy.eval.eps for name in ("pong-dqn", "breakout-dqn")} == {0.05}
    assert load_config("atari100k-der").policy.eval.eps == 0.001
    assert "policy.eval.eps" in {info.key for info in describe_config(load_config("cartpole-dqn"))}
    assert "policy.eval.eps" not in {info.key for info in describe_config(load_config("pendulum-sac"))}
    assert "policy.eval.evaluator.eval_freq" in {info.key for info in describe_config(load_config("pendulum-sac"))}
    with pytest.raises(ConfigError, match=r"^config key 'policy\.eval\.eps': Input should be less than or equal to 1"):
        load_config("cartpole-dqn", ["policy.eval.eps=2"])


def test_learning_rate_keys_name_the_algorithms_own_keys():
    assert learning_rate_keys("sac") == ("policy.learn.learning_rate_actor", "policy.learn.learning_rate_q",
                                         "policy.learn.learning_rate_alpha")
    assert learning_rate_keys("dqn") == ("policy.learn.learning_rate",)
    assert learning_rate_keys(None) == learning_rate_keys("dqn_command") == ("policy.learn.learning_rate",)


@pytest.mark.parametrize(("override", "message"), [
    ("policy.model.core=none",
     "config key 'policy.model.core': policy.type 'r2d2' needs a recurrent core (gru or lstm)"),
    ("policy.learn.burn_in=50", "config key 'policy.collect.unroll_len' (50) must exceed policy.learn.burn_in (50): "
     "a sequence needs steps to learn from"),
    ("policy.collect.sequence_stride=60", "config key 'policy.collect.sequence_stride' (60) is longer than a sequence "
     "(policy.collect.unroll_len 50): steps between sequences would never be learned from"),
    ("policy.collect.n_episode=2", "config key 'policy.collect.n_episode' cannot be used with policy.type 'r2d2': it "
     "collects steps (policy.collect.n_sample)"),
    ("policy.other.replay_buffer.IS_weight_anneal_train_iter=5000", "config key "
     "'policy.other.replay_buffer.IS_weight_anneal_train_iter' is not read by policy.type 'r2d2': its importance "
     "weights keep the fixed exponent IS_weight_power_factor (R2D2's 0.6)"),
])
def test_what_a_recurrent_policy_cannot_work_with_is_one_line(override, message):
    with pytest.raises(ConfigError) as err:
        load_config("popgym-repeatprevious-r2d2", [override])
    assert str(err.value) == message


def test_a_saved_recurrent_config_loads_back():
    cfg = load_config("popgym-repeatprevious-r2d2", ["policy.collect.initial_priority=true"])
    assert load_config(cfg.model_dump()) == cfg  # every key listed, defaults included


def test_initial_priorities_need_priority_replay():
    with pytest.raises(ConfigError, match=r"^config key 'policy.collect.initial_priority' needs policy.priority: true"):
        load_config("popgym-repeatprevious-r2d2", ["policy.collect.initial_priority=true", "policy.priority=false"])
    cfg = load_config("popgym-repeatprevious-r2d2", ["policy.collect.initial_priority=true"])
    assert cfg.policy.collect.initial_priority
