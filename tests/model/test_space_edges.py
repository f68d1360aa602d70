"""Spaces where the env meets the model: stacked vector frames, dicts without goals and 2-D boxes
made by the env factory reach ``fill_model_shapes`` and the encoders; action spaces the DQN family
cannot take are one line without an array dump."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from gymnasium import spaces

from rlpipe.config import ConfigError, load_config
from rlpipe.model import make_encoder
from rlpipe.model.encoders import encoder_kind, model_observation_space
from rlpipe.recipes.build import fill_model_shapes
from rlpipe.recipes.envs import make_env_factory
from tests import space_envs

FRAME_STACK = "env.wrappers=[{type: gymnasium.wrappers.FrameStackObservation, kwargs: {stack_size: 3}}]"


def made(preset: str, overrides: list[str]):
    """The config and one env as the run makes them (the factory's wrappers included)."""
    cfg = load_config(preset, overrides)
    return cfg, make_env_factory(cfg)()


def test_frame_stacked_vectors_are_a_2d_box_read_flattened():
    cfg, env = made("cartpole-dqn", [FRAME_STACK])
    assert env.observation_space.shape == (3, 4)
    model = fill_model_shapes(cfg, env).policy.model
    assert model.obs_shape == (3, 4) and model.obs_categories is None
    space = model_observation_space(model)
    assert encoder_kind(space) == "mlp"
    encoder, n_features = make_encoder(space, model)
    obs, _ = env.reset(seed=0)
    out = encoder(torch.as_tensor(obs)[None])
    assert out.shape == (1, n_features) and out.dtype == torch.float32
    assert encoder[0].in_features == 12  # the stack's 3 x 4 values


def test_a_dict_without_goals_is_one_vector_with_its_discrete_entry_one_hot():
    cfg, env = made("cartpole-dqn", [f"env.env_id=tests.space_envs:{space_envs.DICT_CORRIDOR_ID}"])
    obs, _ = env.reset(seed=0)
    raw = env.unwrapped._obs()  # {"pos": [cell / 6], "target": t}
    expected = np.concatenate([raw["pos"], np.eye(3)[raw["target"]]])  # gymnasium orders the keys: pos, target
    np.testing.assert_array_equal(obs, expected)
    assert fill_model_shapes(cfg, env).policy.model.obs_shape == 4


def test_a_2d_box_env_fills_its_shape():
    cfg, env = made("cartpole-dqn", [f"env.env_id=tests.space_envs:{space_envs.GRID_WALK_ID}"])
    model = fill_model_shapes(cfg, env).policy.model
    assert model.obs_shape == (3, 4) and model.action_shape == 4


def env_with_actions(action_space):
    return SimpleNamespace(observation_space=spaces.Box(-1, 1, (4,), dtype=np.float32), action_space=action_space)


@pytest.mark.parametrize(("action_space", "says"), [
    (spaces.Box(-1, 1, (4, 4), dtype=np.float32), r"discrete action space; .* Box\(shape=\(4, 4\), dtype=float32\)"),
    (spaces.MultiDiscrete(np.full((3, 3), 4)), r"Discrete\(262144\)"),
    (spaces.MultiBinary(70), rf"Discrete\({2**70}\)"),  # exact beyond int64
    (spaces.Discrete(3, start=-1), r"acts with 0..n-1; .* from -1"),
])
def test_actions_the_dqn_family_cannot_take_are_one_line(action_space, says):
    with pytest.raises(ConfigError, match=says) as err:
        fill_model_shapes(load_config("cartpole-dqn"), env_with_actions(action_space))
    assert "\n" not in str(err.value)


def test_a_2d_box_action_space_for_an_actor_critic_is_one_line():
    with pytest.raises(ConfigError, match=r"flat Box\) action space; .* Box\(shape=\(2, 3\)") as err:
        fill_model_shapes(load_config("pendulum-sac"), env_with_actions(spaces.Box(-1, 1, (2, 3), dtype=np.float32)))
    assert "\n" not in str(err.value)
