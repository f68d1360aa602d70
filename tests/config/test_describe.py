"""``rlpipe config show``: every key a user can set, with its type, value, default and meaning."""
from __future__ import annotations

from rlpipe.cli.main import main
from rlpipe.config import load_config
from rlpipe.config.algorithms import ALGORITHMS
from rlpipe.config.describe import REQUIRED, describe_config


def keys_of(model_dump, prefix=""):
    for key, value in model_dump.items():
        if isinstance(value, dict) and key != "env_kwargs":
            yield from keys_of(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}"


def test_every_leaf_key_the_algorithm_reads_is_described():
    cfg = load_config("deepsea-dqn-rnd")
    described = {info.key: info for info in describe_config(cfg)}
    row = ALGORITHMS[cfg.policy.type]
    assert {key for key in keys_of(cfg.model_dump()) if row.reads(key)} <= set(described)
    assert all(row.reads(key) for key in described)
    assert set(keys_of(cfg.model_dump())) <= {info.key for info in describe_config()}  # no config: every key
    batch = described["policy.learn.batch_size"]
    assert (batch.type, batch.value, batch.default) == ("int (> 0)", 64, 64)
    assert batch.description == "Transitions per training batch."
    assert described["reward_model.type"].default == REQUIRED and described["reward_model.type"].value == "rnd"
    assert described["policy.other.eps.type"].type == "'constant' | 'linear' | 'exp'"
    assert described["env.max_episode_steps"].type == "int (> 0) | None"
    assert all(info.description for info in described.values())


def test_sections_that_are_off_still_list_their_keys_with_defaults():
    described = {info.key: info for info in describe_config(load_config("cartpole-dqn"))}
    assert described["policy.other.her"].value is None
    assert described["policy.other.her.her_strategy"].value == "future"
    assert described["reward_model.intrinsic_reward_weight"].value == 1.0


def test_config_show_prints_the_table(capsys):
    assert main(["config", "show", "cartpole-dqn", "seed=7"]) == 0
    out = capsys.readouterr().out
    assert "policy.learn.update_per_collect" in out and "dict[str, Any]" in out and "Seed of envs" in out
    assert any(line.split("│")[1].strip() == "seed" and line.split("│")[3].strip() == "7"
               for line in out.splitlines() if "│" in line)


def test_a_learning_rate_schedule_is_shown_as_it_is_written(capsys):
    cfg = load_config("cartpole-dqn", ["policy.learn.learning_rate=linear(1e-3, 1e-4)"])
    lr = {info.key: info for info in describe_config(cfg)}["policy.learn.learning_rate"]
    assert (lr.type, lr.value, lr.default) == ("float | Schedule", "linear(0.001, 0.0001)", 1e-3)
    assert "schedule over env steps" in lr.description
    assert main(["config", "show", "cartpole-dqn", "policy.learn.learning_rate=linear(1e-3,1e-4)",
                 "policy.eval.evaluator.eval_freq=null", "policy.eval.evaluator.eval_every_env_steps=500"]) == 0
    rows = {line.split("│")[1].strip(): line.split("│")[3].strip()
            for line in capsys.readouterr().out.splitlines() if line.count("│") > 3}
    assert rows["policy.learn.learning_rate"] == "'linear(0.001, 0.0001)'"
    assert (rows["policy.eval.evaluator.eval_freq"], rows["policy.eval.evaluator.eval_every_env_steps"]) == (
        "None", "500")


def test_config_show_of_an_unknown_preset_is_one_line(capsys):
    assert main(["config", "show", "cartpole-dgn"]) == 2
    assert capsys.readouterr().err.strip() == (
        "rlpipe config: error: unknown preset 'cartpole-dgn' (did you mean 'cartpole-dqn'?)")


def test_with_noisy_networks_no_epsilon_key_is_shown(capsys):
    for preset in ("cartpole-c51", "cartpole-qrdqn"):
        plain = {info.key for info in describe_config(load_config(preset))}
        noisy = {info.key for info in describe_config(load_config(preset, ["policy.model.noisy=true"]))}
        assert "policy.other.eps.decay" in plain  # epsilon-greedy by default
        assert plain - noisy == {f"policy.other.eps.{key}" for key in ("type", "start", "end", "decay")}
        assert noisy <= plain
    assert main(["config", "show", "cartpole-c51", "policy.model.noisy=true"]) == 0
    out = capsys.readouterr().out
    assert "policy.model.noisy" in out and "policy.other.eps" not in out
