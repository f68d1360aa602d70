"""Config input as SB3 users write it: scientific-notation integers and SB3's argument names."""
from __future__ import annotations

import pytest

from rlpipe.config import ConfigError, load_config


@pytest.mark.parametrize("text", ["run.max_env_step=1e5", "run.max_env_step=1.0e5", "run.max_env_step=100000"])
def test_integer_keys_accept_scientific_notation(text):
    assert load_config("cartpole-dqn", [text]).run.max_env_step == 100_000


def test_scientific_notation_in_a_yaml_file(tmp_path):
    path = tmp_path / "cfg.yaml"
    path.write_text("run:\n  max_env_step: 2e4\npolicy:\n  learn:\n    learning_rate: 3e-4\n")
    cfg = load_config(path)
    assert cfg.run.max_env_step == 20_000 and cfg.policy.learn.learning_rate == pytest.approx(3e-4)


def test_a_fractional_value_for_an_integer_key_is_one_line():
    with pytest.raises(ConfigError, match=r"config key 'run.max_env_step': .*fractional part \(got 2500.5\)"):
        load_config("cartpole-dqn", ["run.max_env_step=2.5005e3"])


@pytest.mark.parametrize(("override", "message"), [
    ("lr=1e-3", "unknown config key 'lr': Stable-Baselines3's 'lr' is 'policy.learn.learning_rate' here"),
    ("buffer_size=1000", "unknown config key 'buffer_size': Stable-Baselines3's 'buffer_size' is "
                         "'policy.other.replay_buffer.replay_buffer_size' here"),
    ("policy.gradient_steps=4", "unknown config key 'policy.gradient_steps': Stable-Baselines3's 'gradient_steps' "
                                "is 'policy.learn.update_per_collect' (or 'policy.learn.replay_ratio') here"),
    ("train_freq=4", "unknown config key 'train_freq': Stable-Baselines3's 'train_freq' is "
                     "'policy.collect.n_sample' here"),
    ("learning_starts=1000", "unknown config key 'learning_starts': Stable-Baselines3's 'learning_starts' is "
                             "'policy.random_collect_size' here"),
    ("exploration_fraction=0.1", "unknown config key 'exploration_fraction': Stable-Baselines3's "
                                 "'exploration_fraction' is 'policy.other.eps.decay' (env steps) here"),
    ("net_arch=[64,64]", "unknown config key 'net_arch': Stable-Baselines3's 'net_arch' is "
                         "'policy.model.encoder_hidden_size_list' here"),
    ("device=cuda", "unknown config key 'device': Stable-Baselines3's 'device' is 'policy.cuda' (true: train on "
                    "the GPU) here"),
    ("n_envs=4", "unknown config key 'n_envs': Stable-Baselines3's 'n_envs' is 'env.collector_env_num' here"),
    ("policy_kwargs.net_arch=[64]", "unknown config key 'policy_kwargs': Stable-Baselines3's 'policy_kwargs' is "
                                    "'policy.model' (set its keys one by one, e.g. "
                                    "policy.model.encoder_hidden_size_list=[64,64]) here"),
    ("policy.learn.batch_sizes=3", "unknown config key 'policy.learn.batch_sizes' (did you mean "
                                   "'policy.learn.batch_size'?)"),
])
def test_sb3_names_get_a_pointer_to_rlpipes_key(override, message):
    with pytest.raises(ConfigError) as err:
        load_config("cartpole-dqn", [override])
    assert str(err.value) == message



@pytest.mark.parametrize(("preset", "key", "hint"), [
    ("pendulum-sac", "learning_rate",
     "'policy.learn.learning_rate_actor' / 'policy.learn.learning_rate_q' / 'policy.learn.learning_rate_alpha'"),
    ("pendulum-td3", "policy.learn.lr", "'policy.learn.learning_rate_actor' / 'policy.learn.learning_rate_q'"),
    ("cartpole-dqn", "learning_rate", "'policy.learn.learning_rate'"),
])
def test_the_learning_rate_hint_names_the_keys_the_configs_algorithm_reads(preset, key, hint):
    with pytest.raises(ConfigError) as err:
        load_config(preset, [f"{key}=1e-3"])
    name = key.rpartition(".")[2]
    assert str(err.value) == f"unknown config key '{key}': Stable-Baselines3's '{name}' is {hint} here"
