"""Env settings, the backend table and the env layer's own errors (which name env settings, not config keys)."""
from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rlpipe.envs import (
    VECTOR_BACKENDS,
    EnvSettingError,
    EnvSettings,
    VectorEnvManager,
    env_factory,
    make_vector_env,
)
from rlpipe.envs.vector import GymnasiumVectorBackend
from rlpipe.envs.vector_wrappers import TransitionBatches

REPO = Path(__file__).resolve().parents[2]


def test_the_gymnasium_backend_steps_the_same_envs_as_the_manager_over_the_factory():
    settings = EnvSettings("CartPole-v1", max_episode_steps=50)
    made = make_vector_env(settings, num_envs=2, seed=3)
    direct = VectorEnvManager(env_factory("CartPole-v1", max_episode_steps=50), num_envs=2, seed=3)
    try:
        assert isinstance(made, TransitionBatches) and isinstance(made.unwrapped, GymnasiumVectorBackend)
        np.testing.assert_array_equal(made.obs, direct.obs)
        action = np.array([0, 1])
        np.testing.assert_array_equal(made.step(action)["next_obs"], direct.step(action)["next_obs"])
    finally:
        made.close()
        direct.close()


def test_the_backend_the_settings_name_makes_the_envs(monkeypatch):
    calls = []

    def fake_backend(settings: EnvSettings, num_envs: int, seed: int) -> GymnasiumVectorBackend:
        calls.append((settings.env_id, num_envs, seed))
        return GymnasiumVectorBackend(settings.single_env_factory(), num_envs)

    monkeypatch.setitem(VECTOR_BACKENDS, "fake", fake_backend)
    made = make_vector_env(EnvSettings("CartPole-v1", backend="fake"), 4, 7)
    try:
        assert calls == [("CartPole-v1", 4, 7)] and isinstance(made.unwrapped, GymnasiumVectorBackend)
        assert made.step(made.random_actions())["obs"].shape == (4, 4)  # inside the wrappers every backend gets
    finally:
        made.close()


def test_an_unknown_backend_names_the_setting():
    with pytest.raises(EnvSettingError,
                       match=r"^backend: unknown vector env backend 'nope' \(use one of ale_vector, gymnasium\)"):
        make_vector_env(EnvSettings("CartPole-v1", backend="nope"), 1, 0)


@pytest.mark.parametrize(("kwargs", "setting", "reason"), [
    ({"env_id": "CartPle-v1"}, "env_id", "unknown gymnasium environment 'CartPle-v1' (did you mean 'CartPole-v1'?)"),
    ({"env_id": "tests.no_such_module:X-v0"}, "env_id", "cannot import module 'tests.no_such_module'"),
    ({"env_id": "CartPole-v1", "imports": ["tests.no_such_module"]}, "imports", "cannot import module"),
    ({"env_id": "CartPole-v1", "wrappers": [{"type": "Nope"}]}, "wrappers[0].type",
     "gymnasium.wrappers has no wrapper 'Nope'"),
])
def test_a_wrong_setting_is_named_when_the_factory_is_made(kwargs, setting, reason):
    with pytest.raises(EnvSettingError) as err:
        env_factory(**kwargs)
    assert err.value.setting == setting
    assert err.value.reason.startswith(reason)
    assert str(err.value) == f"{setting}: {err.value.reason}"


@pytest.mark.parametrize(("kwargs", "setting", "reason"), [
    ({"env_kwargs": {"foo": 3}}, "env_kwargs", "env 'CartPole-v1' could not be made with {'foo': 3} ("),
    ({"wrappers": [{"type": "TimeLimit", "kwargs": {"steps": 3}}]}, "wrappers[0]",
     "TimeLimit(**{'steps': 3}) failed ("),
])
def test_a_setting_the_env_rejects_is_named_when_an_env_is_made(kwargs, setting, reason):
    make = env_factory("CartPole-v1", **kwargs)
    with pytest.raises(EnvSettingError) as err:
        make()
    assert err.value.setting == setting
    assert err.value.reason.startswith(reason)


def test_a_setting_error_survives_pickling():  # subprocess envs hand their errors back pickled
    err = pickle.loads(pickle.dumps(EnvSettingError("bad kwargs", "env_kwargs")))
    assert (err.setting, err.reason, str(err)) == ("env_kwargs", "bad kwargs", "env_kwargs: bad kwargs")


def test_the_env_layer_imports_without_the_config_layer():
    code = "import sys; sys.modules['rlpipe.config'] = None; import rlpipe.envs; print('ok')"
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
