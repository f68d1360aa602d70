"""make_encoder: the encoder of each observation space, its features, and its conversion to float32."""
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from gymnasium import spaces
from torch import nn

from rlpipe.config import ConfigError, load_config
from rlpipe.config.encoders import ENCODERS
from rlpipe.config.schema import ModelConfig
from rlpipe.envs.goal import GOAL_KEYS, GoalLayout
from rlpipe.model import DQN, EncoderConfig, EnsembleQ, SquashedGaussianActor, make_encoder
from rlpipe.model.encoders import GOAL_LAYOUT, DictEncoder, MlpEncoder, encoder_kind, observation_space


def box(*shape, dtype=np.float32):
    return spaces.Box(0, 1, shape, dtype=dtype)


def goal_space(obs=3, goal=2):
    return spaces.Dict({"observation": box(obs), "achieved_goal": box(goal), "desired_goal": box(goal)})


def linear_sizes(module):
    return [(m.in_features, m.out_features) for m in module if isinstance(m, nn.Linear)]


# ---- flat Box ------------------------------------------------------------------------
def test_box_gives_an_mlp_and_its_feature_count():
    encoder, n = make_encoder(box(4), EncoderConfig((16, 8)))
    assert isinstance(encoder, MlpEncoder) and n == 8
    assert linear_sizes(encoder) == [(4, 16), (16, 8)]
    assert encoder(torch.zeros(5, 4)).shape == (5, 8)


def test_without_hidden_layers_the_features_are_the_observation_as_float32():
    encoder, n = make_encoder(box(3), EncoderConfig(()))
    obs = torch.tensor([[1, 2, 3]], dtype=torch.int64)
    assert n == 3 and len(encoder) == 0
    features = encoder(obs)
    assert features.dtype == torch.float32
    torch.testing.assert_close(features, torch.tensor([[1.0, 2.0, 3.0]]))


@pytest.mark.parametrize("dtype", [torch.float64, torch.uint8, torch.int32, torch.bool])
def test_any_dtype_gives_the_features_of_its_float32_values(dtype):
    torch.manual_seed(0)
    encoder, _ = make_encoder(box(4), EncoderConfig((8,)))
    obs = torch.tensor([[0, 1, 1, 0], [1, 0, 1, 1]]).to(dtype)
    features = encoder(obs)
    assert features.dtype == torch.float32
    torch.testing.assert_close(features, encoder(obs.to(torch.float32)), rtol=0, atol=0)


def test_same_layers_and_initialisation_as_a_plain_stack():
    """The networks draw their weights in the order they did before encoders: Linear by Linear, then the head."""
    torch.manual_seed(3)
    model = DQN(4, 2, encoder_hidden_size_list=(16, 8))
    torch.manual_seed(3)
    legacy = [nn.Linear(4, 16), nn.Linear(16, 8), nn.Linear(8, 2)]
    assert list(model.state_dict()) == ["encoder.0.weight", "encoder.0.bias", "encoder.2.weight", "encoder.2.bias",
                                        "head.weight", "head.bias"]
    for got, want in zip(model.parameters(), [p for layer in legacy for p in layer.parameters()], strict=True):
        assert torch.equal(got, want)


def test_wrong_size_names_both_shapes():
    encoder, _ = make_encoder(box(4), EncoderConfig((8,)))
    with pytest.raises(ValueError, match=r"model expects observations of size 4, got shape \(2, 5\)"):
        encoder(torch.zeros(2, 5))


def test_batch_renorm_wraps_the_input_and_each_hidden_layer():
    encoder, n = make_encoder(box(4), EncoderConfig((8, 8), batch_renorm=True))
    kinds = [type(m).__name__ for m in encoder]
    assert n == 8
    assert kinds == ["BatchRenorm", "Linear", "ReLU", "BatchRenorm", "Linear", "ReLU", "BatchRenorm"]


# ---- choosing the encoder --------------------------------------------------------------
def test_auto_chooses_mlp_for_vectors_and_refuses_images_in_one_line():
    assert encoder_kind(box(4)) == "mlp"
    assert encoder_kind(goal_space()) == "mlp"
    with pytest.raises(ValueError, match=r"observations Box\(shape=\(84, 84, 4\), dtype=uint8\)") as err:
        encoder_kind(box(84, 84, 4, dtype=np.uint8))
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="unknown encoder 'cnn': use one of auto, mlp"):
        encoder_kind(box(4), "cnn")


def test_mlp_flattens_a_shaped_box_when_asked():
    encoder, n = make_encoder(box(2, 3), EncoderConfig((5,), "mlp"))
    assert linear_sizes(encoder) == [(6, 5)] and n == 5
    obs = torch.arange(12.0).reshape(2, 2, 3)
    torch.testing.assert_close(encoder(obs), encoder[1](encoder[0](obs.reshape(2, 6))))


def test_the_config_key_takes_every_registered_encoder_and_only_those_or_import_paths():
    for name in ("auto", *ENCODERS):
        assert load_config("cartpole-dqn", [f"policy.model.encoder={name}"]).policy.model.encoder == name
    user = load_config("cartpole-dqn", ["policy.model.encoder=my_pkg.nets:Enc"])
    assert user.policy.model.encoder == "my_pkg.nets:Enc"
    with pytest.raises(ConfigError, match="unknown encoder 'cnn': use one of auto, mlp, nature_cnn, minatar_cnn"):
        load_config("cartpole-dqn", ["policy.model.encoder=cnn"])
    assert all(name in ModelConfig.model_fields["encoder"].description for name in ENCODERS)


def test_a_model_config_or_a_seed_namespace_is_a_cfg():
    seed_cfg = SimpleNamespace(obs_shape=4, action_shape=2, encoder_hidden_size_list=[8])
    assert make_encoder(box(4), seed_cfg)[1] == 8
    assert make_encoder(box(4), ModelConfig(encoder_hidden_size_list=[6]))[1] == 6


def test_a_shape_is_a_float32_box():
    assert observation_space(4) == observation_space((4,))
    space = observation_space((2, 3))
    assert isinstance(space, spaces.Box) and space.shape == (2, 3) and space.dtype == np.float32
    with pytest.raises(ValueError, match="obs_shape must be positive sizes"):
        observation_space((0, 3))


# ---- Dict --------------------------------------------------------------------------------
def test_goal_dict_is_concatenated_in_the_goal_envs_flat_layout():
    assert GOAL_LAYOUT == GOAL_KEYS
    encoder, n = make_encoder(goal_space(3, 2), EncoderConfig(()))
    assert isinstance(encoder, DictEncoder) and n == 7
    rng = np.random.default_rng(0)
    obs = {"observation": rng.normal(size=(4, 3)), "achieved_goal": rng.normal(size=(4, 2)),
           "desired_goal": rng.normal(size=(4, 2))}
    flat = GoalLayout(3, 2, compute_reward=lambda *args: 0.0).flatten(obs)
    features = encoder({key: torch.as_tensor(value) for key, value in obs.items()})
    assert features.dtype == torch.float32
    torch.testing.assert_close(features, torch.as_tensor(flat), rtol=0, atol=0)


def test_other_dicts_keep_the_spaces_order_and_flatten_each_entry():
    space = spaces.Dict({"a": box(2), "b": box(2, 2)})
    encoder, n = make_encoder(space, EncoderConfig((), "mlp"))
    assert n == 6
    obs = {"b": torch.arange(8.0).reshape(2, 2, 2), "a": torch.ones(2, 2, dtype=torch.uint8)}
    torch.testing.assert_close(encoder(obs), torch.cat([obs["a"].float(), obs["b"].reshape(2, 4)], dim=1))
    with pytest.raises(ValueError, match=r"missing \['b'\]"):
        encoder({"a": obs["a"]})


def test_networks_read_a_goal_dict_as_its_flat_vector():
    torch.manual_seed(0)
    dict_net = DQN(goal_space(3, 2), 2, encoder_hidden_size_list=(8,))
    torch.manual_seed(0)
    flat_net = DQN(7, 2, encoder_hidden_size_list=(8,))
    obs = {key: torch.randn(5, 3 if key == "observation" else 2) for key in GOAL_KEYS}
    flat = torch.cat([obs[key] for key in GOAL_KEYS], dim=1)
    torch.testing.assert_close(dict_net(obs), flat_net(flat), rtol=0, atol=0)


@pytest.mark.parametrize("make", [
    lambda space: SquashedGaussianActor(space, 2, (8,)),
    lambda space: EnsembleQ(space, 2, (8,)),
])
def test_actors_and_critics_take_their_encoder_from_the_space(make):
    net = make(goal_space(3, 2))
    obs = {key: torch.zeros(4, 3 if key == "observation" else 2, dtype=torch.float64) for key in GOAL_KEYS}
    out = net(obs) if isinstance(net, SquashedGaussianActor) else net(obs, torch.zeros(4, 2))
    assert (out[0] if isinstance(out, tuple) else out).dtype == torch.float32


# ---- policy.model.obs_shape ----------------------------------------------------------------
@pytest.mark.parametrize(("written", "read"), [(4, 4), ([4], 4), ("4", 4), ([84, 84, 4], (84, 84, 4))])
def test_obs_shape_reads_a_vector_as_its_size_and_longer_shapes_as_tuples(written, read):
    """Old configs and checkpoints (``obs_shape: 4``) load as they did; a shape dumps back as a list."""
    model = ModelConfig(obs_shape=written)
    assert model.obs_shape == read
    assert ModelConfig.model_validate(model.model_dump(mode="json")).obs_shape == read


@pytest.mark.parametrize("bad", [0, [], [0, 3], [4, "a"]])
def test_obs_shape_refuses_non_positive_sizes(bad):
    with pytest.raises(ValueError, match="must be a positive size or a list of positive sizes"):
        ModelConfig(obs_shape=bad)
