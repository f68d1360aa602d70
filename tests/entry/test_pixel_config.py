"""Config wiring of pixel envs: ALE and MinAtar ids, env.atari and env.backend, the frame store
switch, check_buffer_fits with frames, and a wrong encoder for the env, each a one-line error."""
from __future__ import annotations

from typing import get_args

import numpy as np
import pytest

from rlpipe.config import ConfigError, load_config
from rlpipe.config.schema import EnvConfig
from rlpipe.envs import VECTOR_BACKENDS
from rlpipe.envs.ale_vector import AleVectorEnv
from rlpipe.recipes import build
from rlpipe.recipes.build import check_buffer_fits, fill_model_shapes, transition_nbytes, uses_frame_store
from rlpipe.recipes.envs import make_env_factory, make_vector_env

pytest.importorskip("ale_py")
pytest.importorskip("minatar")

ONE_ENV = ["env.collector_env_num=1", "env.evaluator_env_num=1"]


def filled(preset: str, *overrides: str):
    cfg = load_config(preset, [*ONE_ENV, *overrides])
    env = make_vector_env(cfg, 1, 0)
    try:
        return fill_model_shapes(cfg, env)
    finally:
        env.close()


def one_line(err: pytest.ExceptionInfo) -> str:
    text = str(err.value)
    assert "\n" not in text
    return text


def test_the_backend_key_lists_every_vector_backend():
    assert set(get_args(EnvConfig.model_fields["backend"].annotation)) == set(VECTOR_BACKENDS)


def vector_wrapper_names(env) -> list[str]:
    """The vector wrappers around a vector env's backend, outermost first."""
    names = []
    while type(env).__module__ == "rlpipe.envs.vector_wrappers":
        names.append(type(env).__name__)
        env = env.env
    return names


def test_ale_ids_are_train_envs_for_the_collector_and_whole_games_for_evaluation():
    cfg = load_config("pong-dqn", ONE_ENV)
    train, evaluate = make_vector_env(cfg, 1, 0, train=True), make_vector_env(cfg, 1, 0)
    try:
        assert train.observation_space.shape == (4, 84, 84) and train.observation_space.dtype == np.uint8
        assert {"ClipRewards", "LifeLossEpisodes"} <= set(vector_wrapper_names(train))
        assert not {"ClipRewards", "LifeLossEpisodes"} & set(vector_wrapper_names(evaluate))
    finally:
        train.close()
        evaluate.close()


def test_atari_settings_reach_the_game():
    cfg = load_config("breakout-dqn", [*ONE_ENV, "env.atari={repeat_action_probability: 0.0, full_action_space: true}"])
    env = make_env_factory(cfg)()
    try:
        assert env.action_space.n == 18
        assert env.unwrapped.ale.getFloat("repeat_action_probability") == 0.0
    finally:
        env.close()


def test_minatar_ids_observe_channels_first_uint8():
    cfg = filled("minatar-breakout-dqn")
    model = cfg.policy.model
    assert model.obs_shape == (4, 10, 10) and model.obs_dtype == "uint8" and model.obs_high == 1.0
    assert not uses_frame_store(cfg)  # MinAtar's channels are kinds of objects, not frames


@pytest.mark.parametrize(("overrides", "key"), [
    (["env.env_id=CartPole-v1", "env.atari={noop_max: 0}"], "env.atari"),
    (["env.env_id=CartPole-v1", "env.backend=ale_vector"], "env.backend"),
    (["env.env_kwargs={frameskip: 1}"], "env.env_kwargs"),
    (["env.max_episode_steps=100"], "env.max_episode_steps"),
    (["env.backend=ale_vector", "env.asynchronous=true"], "env.asynchronous"),
])
def test_env_settings_in_the_wrong_place_are_one_line_naming_the_key(overrides, key):
    cfg = load_config("pong-dqn", [*ONE_ENV, *overrides])
    with pytest.raises(ConfigError, match=rf"config key '{key}'") as err:
        make_vector_env(cfg, 1, 0).close()
    one_line(err)


def test_ale_vector_backend_is_an_ale_vector_env():
    cfg = load_config("pong-dqn", [*ONE_ENV, "env.backend=ale_vector"])
    env = make_vector_env(cfg, 2, 0, train=True)
    try:
        assert isinstance(env.unwrapped, AleVectorEnv) and env.observation_space.shape == (4, 84, 84)
    finally:
        env.close()


def test_frame_store_auto_for_ale_stacks_and_its_switch():
    pong = filled("pong-dqn")
    assert pong.policy.model.obs_shape == (4, 84, 84) and pong.policy.model.obs_high == 255.0
    assert uses_frame_store(pong)
    pong.policy.other.replay_buffer.frame_store = False
    assert not uses_frame_store(pong)
    cartpole = filled("cartpole-dqn", "policy.other.replay_buffer.frame_store=true")
    with pytest.raises(ConfigError, match=r"config key 'policy\.other\.replay_buffer\.frame_store' is true") as err:
        uses_frame_store(cartpole)
    one_line(err)


def test_a_million_atari_transitions_do_not_fit_in_4_gb_in_one_line(monkeypatch):
    cfg = filled("pong-dqn", "policy.other.replay_buffer.replay_buffer_size=1000000")
    need, row = transition_nbytes(cfg)
    assert 7056 < row < 7300 and need // 1_000_000 == row  # about one 84x84 frame per transition
    monkeypatch.setattr(build, "available_memory", lambda: 4 * 2**30)
    with pytest.raises(ConfigError, match=r"replay_buffer_size': 1000000 transitions of about 7\d\d\d bytes "
                       r"\(each frame kept once\) need 6\.\d GiB; 4\.0 GiB") as err:
        check_buffer_fits(cfg)
    one_line(err)
    monkeypatch.setattr(build, "available_memory", lambda: 8 * 2**30)
    check_buffer_fits(cfg)  # fits in 8 GB with frames kept once (the stacks, 56 KB each, would need 53 GiB)
    cfg.policy.other.replay_buffer.frame_store = False
    assert transition_nbytes(cfg)[1] == 2 * 4 * 84 * 84 + 8 + 32


def test_mlp_on_atari_frames_is_one_line_naming_the_key():
    cfg = load_config("pong-dqn", [*ONE_ENV, "policy.model.encoder=mlp"])
    env = make_vector_env(cfg, 1, 0)
    try:
        with pytest.raises(ConfigError, match=r"policy\.model\.encoder 'mlp' cannot read observations "
                           r"Box\(shape=\(4, 84, 84\), dtype=uint8\)") as err:
            fill_model_shapes(cfg, env)
        one_line(err)
    finally:
        env.close()
