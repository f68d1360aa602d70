"""The env layer's errors name its own settings; the recipes word them in config keys, for every
env a run makes (the vector envs, the one-off env of the goal probe and of a loaded agent)."""
from __future__ import annotations

import pytest

from rlpipe.config import ConfigError, load_config
from rlpipe.envs import EnvSettingError
from rlpipe.recipes.envs import (
    config_key,
    env_settings,
    make_env_factory,
    make_vector_env,
    setting_errors_as_config_keys,
)


@pytest.mark.parametrize(("setting", "key"), [
    ("env_id", "env.env_id"),
    ("env_kwargs", "env.env_kwargs"),
    ("imports", "env.import"),
    ("wrappers[2]", "env.wrappers[2]"),
    ("wrappers[0].type", "env.wrappers[0].type"),
])
def test_each_env_setting_has_its_config_key(setting, key):
    assert config_key(setting) == key


def test_a_setting_error_becomes_a_config_error_naming_the_key():
    with pytest.raises(ConfigError) as err, setting_errors_as_config_keys():
        raise EnvSettingError("cannot import module 'x' (gone)", "imports")
    assert str(err.value) == "config key 'env.import': cannot import module 'x' (gone)"


def test_the_settings_carry_the_config_and_a_timeout_for_subprocess_envs():
    cfg = load_config("cartpole-dqn", ["env.asynchronous=true", "env.env_kwargs.sutton_barto_reward=true"])
    settings = env_settings(cfg)
    assert (settings.env_id, dict(settings.env_kwargs), settings.asynchronous) == (
        "CartPole-v1", {"sutton_barto_reward": True}, True)
    assert settings.step_timeout is not None and settings.step_timeout > 0


BAD_WRAPPER = "env.wrappers=[{type: TimeLimit, kwargs: {steps: 3}}]"
WRAPPER_MESSAGE = ("config key 'env.wrappers[0]': TimeLimit(**{'steps': 3}) failed (TimeLimit.__init__() got an "
                   "unexpected keyword argument 'steps')")


def test_a_vector_env_names_the_wrapper_at_fault_alone():
    with pytest.raises(ConfigError) as err:
        make_vector_env(load_config("cartpole-dqn", [BAD_WRAPPER]), 1, 0)
    assert str(err.value) == WRAPPER_MESSAGE


def test_a_single_env_names_the_config_key_too():
    make = make_env_factory(load_config("cartpole-dqn", [BAD_WRAPPER]))
    with pytest.raises(ConfigError) as err:
        make()
    assert str(err.value) == WRAPPER_MESSAGE


def test_an_unknown_env_id_is_named_when_the_factory_is_made():
    with pytest.raises(ConfigError, match=r"^config key 'env.env_id': unknown gymnasium environment 'CartPle-v1' "
                                          r"\(did you mean 'CartPole-v1'\?\)$"):
        make_env_factory(load_config("cartpole-dqn", ["env.env_id=CartPle-v1"]))
