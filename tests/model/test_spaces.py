"""Every gymnasium observation space that can be learned reaches the encoders as float32 features,
and ``fill_model_shapes`` accepts it; the DQN family refuses multi-dimensional discrete actions in one line."""
from __future__ import annotations

from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces

from rlpipe.config import ConfigError, load_config
from rlpipe.envs.factory import _standard_wrappers
from rlpipe.model import EncoderConfig, make_encoder
from rlpipe.model.encoders import DictEncoder, MlpEncoder, OneHotEncoder, encoder_kind, model_observation_space
from rlpipe.recipes.build import fill_model_shapes, make_policy

NO_LAYERS = EncoderConfig(())  # the features are what the encoder's prepare step makes


def features(space, obs):
    encoder, n = make_encoder(space, NO_LAYERS)
    out = encoder(obs)
    assert out.dtype == torch.float32 and out.shape[-1] == n
    return encoder, out


def test_discrete_is_one_hot():
    encoder, out = features(spaces.Discrete(5), torch.tensor([0, 3, 4]))
    assert isinstance(encoder, OneHotEncoder)
    torch.testing.assert_close(out, torch.eye(5)[[0, 3, 4]])


def test_multi_discrete_is_one_hot_per_dimension():
    _, out = features(spaces.MultiDiscrete([2, 3]), torch.tensor([[1, 0], [0, 2]]))
    assert out.shape == (2, 5)
    torch.testing.assert_close(out, torch.tensor([[0.0, 1, 1, 0, 0], [1.0, 0, 0, 0, 1]]))


def test_multi_discrete_of_two_axes_is_one_hot_per_value_in_row_order():
    _, out = features(spaces.MultiDiscrete([[2, 2], [3, 3]]), torch.tensor([[[1, 0], [2, 1]]]))
    torch.testing.assert_close(out, torch.tensor([[0.0, 1, 1, 0, 0, 0, 1, 0, 1, 0]]))


def test_multi_binary_is_its_0_1_vector():
    encoder, out = features(spaces.MultiBinary(4), torch.tensor([[1, 0, 0, 1]], dtype=torch.int8))
    assert isinstance(encoder, MlpEncoder)
    torch.testing.assert_close(out, torch.tensor([[1.0, 0, 0, 1]]))


def test_an_n_d_box_is_flattened_by_auto():
    stacked = spaces.Box(-1, 1, (3, 4), dtype=np.float32)  # FrameStackObservation's [K, n] of a vector env
    assert encoder_kind(stacked) == "mlp"
    obs = torch.arange(24.0).reshape(2, 3, 4)
    _, out = features(stacked, obs)
    torch.testing.assert_close(out, obs.reshape(2, 12))


def test_a_dict_concatenates_each_entry_as_its_space_reads():
    space = spaces.Dict({"pos": spaces.Box(-1, 1, (2,)), "cell": spaces.Discrete(3), "bits": spaces.MultiBinary(2)})
    obs = {"pos": torch.tensor([[0.5, -0.5]]), "cell": torch.tensor([2]), "bits": torch.tensor([[0, 1]])}
    encoder, out = features(space, obs)
    assert isinstance(encoder, DictEncoder) and encoder_kind(space) == "mlp"
    assert encoder.keys == ("bits", "cell", "pos")  # gymnasium sorts a plain dict's keys
    torch.testing.assert_close(out, torch.tensor([[0.0, 1, 0, 0, 1, 0.5, -0.5]]))


def test_channels_last_integer_images_are_one_line_naming_the_fix():
    with pytest.raises(ValueError, match="channels-last") as err:
        encoder_kind(spaces.Box(0, 255, (84, 84, 4), dtype=np.uint8))
    assert "\n" not in str(err.value)


# ---- fill_model_shapes -----------------------------------------------------------------
def env_of(observation_space, action_space=None):
    return SimpleNamespace(observation_space=observation_space, action_space=action_space or spaces.Discrete(2))


@pytest.mark.parametrize(("space", "obs_shape", "categories"), [
    (spaces.Discrete(16), 1, [16]),
    (spaces.MultiDiscrete([3, 4]), 2, [3, 4]),
    (spaces.MultiBinary(5), 5, None),
    (spaces.Box(-1, 1, (4, 4), dtype=np.float32), (4, 4), None),
])
def test_fill_model_shapes_accepts_the_space_and_a_policy_learns_from_it(space, obs_shape, categories):
    cfg = fill_model_shapes(load_config("cartpole-dqn", ["policy.nstep=1"]), env_of(space))
    assert cfg.policy.model.obs_shape == obs_shape and cfg.policy.model.obs_categories == categories
    rng = np.random.default_rng(0)
    obs = np.stack([space.sample() for _ in range(8)])
    policy = make_policy(cfg)
    batch = {"obs": obs, "next_obs": obs[::-1].copy(), "action": rng.integers(0, 2, 8), "reward": np.ones(8),
             "terminated": np.zeros(8, dtype=bool)}
    assert np.isfinite(float(policy.learn_mode.forward(batch)["total_loss"]))
    assert policy.collect_mode.forward(obs, 0.0).shape == (8,)


def test_discrete_observations_are_described_by_their_categories():
    cfg = fill_model_shapes(load_config("cartpole-dqn"), env_of(spaces.MultiDiscrete([3, 4])))
    assert model_observation_space(cfg.policy.model) == spaces.MultiDiscrete([3, 4])


def test_a_config_that_disagrees_with_the_envs_categories_is_one_line():
    cfg = load_config("cartpole-dqn", ["policy.model.obs_categories=[8]"])
    with pytest.raises(ConfigError, match=r"'policy.model.obs_categories' is \[8\] but env .* needs \[16\]"):
        fill_model_shapes(cfg, env_of(spaces.Discrete(16)))


def test_discrete_observations_that_do_not_start_at_0_are_one_line():
    with pytest.raises(ConfigError, match="start at 1") as err:
        fill_model_shapes(load_config("cartpole-dqn"), env_of(spaces.Discrete(4, start=1)))
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("action_space", [spaces.MultiDiscrete([3, 3]), spaces.MultiBinary(3)])
@pytest.mark.parametrize("preset", ["cartpole-dqn", "cartpole-c51", "cartpole-qrdqn"])
def test_multi_dimensional_discrete_actions_are_one_line_saying_what_to_do(preset, action_space):
    with pytest.raises(ConfigError, match=r"Discrete\((9|8)\).*np.unravel_index") as err:
        fill_model_shapes(load_config(preset), env_of(spaces.Box(-1, 1, (4,)), action_space))
    assert "\n" not in str(err.value)


# ---- dicts at the env's edge -----------------------------------------------------------
class DictCorridor(gym.Env):
    """A dict observation without goals: a position and a discrete cell."""

    observation_space = spaces.Dict({"pos": spaces.Box(0, 1, (1,), dtype=np.float32), "cell": spaces.Discrete(3)})
    action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return {"pos": np.array([0.25], dtype=np.float32), "cell": 2}, {}

    def step(self, action):
        return self.reset()[0], 0.0, True, False, {}


def test_a_dict_without_goals_arrives_as_one_vector_entry_by_entry():
    env = _standard_wrappers(DictCorridor())
    obs, _ = env.reset(seed=0)
    assert isinstance(env.observation_space, spaces.Box) and env.observation_space.shape == (4,)
    np.testing.assert_array_equal(obs, [0, 0, 1, 0.25])  # gymnasium orders a dict's keys: cell, pos
    cfg = fill_model_shapes(load_config("cartpole-dqn"), env_of(env.observation_space))
    assert cfg.policy.model.obs_shape == 4


@pytest.mark.parametrize("preset", ["pendulum-sac", "pendulum-td3"])
def test_actor_critic_policies_read_one_hot_observations_too(preset):
    env = env_of(spaces.MultiDiscrete([3, 4]), spaces.Box(-1, 1, (1,), dtype=np.float32))
    cfg = fill_model_shapes(load_config(preset, ["policy.nstep=1"]), env)
    obs = np.stack([env.observation_space.sample() for _ in range(8)])
    batch = {"obs": obs, "next_obs": obs[::-1].copy(), "action": np.zeros((8, 1), dtype=np.float32),
             "reward": np.ones(8), "terminated": np.zeros(8, dtype=bool)}
    policy = make_policy(cfg)
    assert np.isfinite(float(policy.learn_mode.forward(batch)["total_loss"]))
    assert policy.eval_mode.forward(obs).shape == (8, 1)
