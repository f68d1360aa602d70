"""Image encoders: the Nature and MinAtar CNNs, the ``auto`` image rule, scaling by ``high``, wrong kinds refused."""
import copy
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from gymnasium import spaces
from torch import nn

from rlpipe.model import DQN, EncoderConfig, EnsembleQ, SquashedGaussianActor, make_encoder
from rlpipe.model.encoders import ImageEncoder, encoder_kind, model_observation_space
from rlpipe.reward_model.icm import IcmRewardModel
from rlpipe.reward_model.rnd import RndRewardModel

ATARI = spaces.Box(0, 255, (4, 84, 84), np.uint8)
MINATAR = spaces.Box(0, 1, (4, 10, 10), np.uint8)


def layer_shapes(encoder):
    return [tuple(m.weight.shape) for m in encoder if isinstance(m, (nn.Conv2d, nn.Linear))]


def test_auto_picks_nature_cnn_for_atari_stacks_and_minatar_cnn_for_10x10():
    assert encoder_kind(ATARI) == "nature_cnn"
    assert encoder_kind(MINATAR) == "minatar_cnn"
    assert encoder_kind(spaces.Box(0, 255, (3, 36, 40), np.uint8)) == "nature_cnn"
    assert encoder_kind(spaces.Box(0, 255, (3, 35, 40), np.uint8)) == "minatar_cnn"


def test_nature_cnn_is_the_papers_network():
    encoder, n = make_encoder(ATARI, EncoderConfig())
    assert n == 512
    assert layer_shapes(encoder) == [(32, 4, 8, 8), (64, 32, 4, 4), (64, 64, 3, 3), (512, 3136)]
    convs = [m for m in encoder if isinstance(m, nn.Conv2d)]
    assert [c.stride for c in convs] == [(4, 4), (2, 2), (1, 1)]
    assert encoder(torch.zeros(2, 4, 84, 84, dtype=torch.uint8)).shape == (2, 512)


def test_minatar_cnn_is_the_papers_network():
    encoder, n = make_encoder(spaces.Box(0, 1, (6, 10, 10), np.uint8), EncoderConfig((7, 7)))
    assert n == 128
    assert layer_shapes(encoder) == [(16, 6, 3, 3), (128, 1024)]  # the hidden sizes are not read
    assert encoder(torch.zeros(3, 6, 10, 10, dtype=torch.uint8)).shape == (3, 128)


def test_minatar_dense_weight_is_stored_input_major_under_the_usual_name_and_shape():
    """A faster layout for MKL, the same network: a plain layout's state dict loads into it and
    gives the same features; copies keep the layout; the Nature CNN keeps the usual one."""
    encoder, _ = make_encoder(MINATAR, EncoderConfig())
    dense = encoder[3]
    assert isinstance(dense, nn.Linear) and dense.weight.shape == (128, 1024) and dense.weight.stride() == (1, 128)
    assert copy.deepcopy(encoder)[3].weight.stride() == (1, 128)
    plain = copy.deepcopy(encoder)
    plain[3].weight = nn.Parameter(dense.weight.detach().contiguous())
    torch.manual_seed(1)
    for layer in (plain[0], plain[3]):
        nn.init.normal_(layer.weight)
    encoder.load_state_dict(plain.state_dict())
    assert dense.weight.stride() == (1, 128)
    obs = torch.randint(0, 2, (32, *MINATAR.shape), dtype=torch.uint8)
    torch.testing.assert_close(encoder(obs), plain(obs))
    nature, _ = make_encoder(ATARI, EncoderConfig())
    assert nature[-2].weight.is_contiguous()


@pytest.mark.parametrize(("space", "scale"), [(ATARI, 255.0), (MINATAR, 1.0)])
def test_uint8_images_are_scaled_by_the_spaces_high(space, scale):
    encoder, _ = make_encoder(space, EncoderConfig())
    assert isinstance(encoder, ImageEncoder) and encoder.scale == scale
    obs = torch.randint(0, int(space.high.max()) + 1, (2, *space.shape), dtype=torch.uint8)
    prepared = encoder.prepare(obs)
    assert prepared.dtype == torch.float32
    torch.testing.assert_close(prepared, obs.to(torch.float32) / scale, rtol=0, atol=0)
    assert obs.dtype == torch.uint8  # the caller's tensor is left alone


def test_nature_cnn_learns_from_channels_last_batches_with_the_same_values_and_gradients():
    """Only a CPU batch that records gradients goes channels-last (faster backward); acting keeps
    the default layout (faster forward), and MinAtar's network never changes layout."""
    torch.manual_seed(0)
    nature, _ = make_encoder(ATARI, EncoderConfig())
    obs = torch.randint(0, 256, (3, *ATARI.shape), dtype=torch.uint8)
    learned = nature.prepare(obs)
    assert learned.is_contiguous(memory_format=torch.channels_last) and not learned.is_contiguous()
    with torch.no_grad():
        assert nature.prepare(obs).is_contiguous()
    torch.testing.assert_close(learned, obs.to(torch.float32) / 255, rtol=0, atol=0)
    minatar, _ = make_encoder(MINATAR, EncoderConfig())
    assert minatar.prepare(torch.ones(3, *MINATAR.shape, dtype=torch.uint8)).is_contiguous()

    def gradients(channels_last: bool) -> list[torch.Tensor]:
        nature.channels_last_backward = channels_last
        nature.zero_grad()
        nature(obs).square().mean().backward()
        return [p.grad.clone() for p in nature.parameters()]

    for layout, default in zip(gradients(True), gradients(False), strict=True):
        torch.testing.assert_close(layout, default, rtol=1e-4, atol=1e-6)


def test_float_images_pass_unscaled():
    encoder, _ = make_encoder(ATARI, EncoderConfig())
    obs = torch.rand(1, 4, 84, 84)
    torch.testing.assert_close(encoder.prepare(obs), obs)


def test_wrong_image_shape_is_one_line():
    encoder, _ = make_encoder(MINATAR, EncoderConfig())
    with pytest.raises(ValueError, match=r"images of shape \[B, 4, 10, 10\], got shape \(2, 10, 10, 4\)"):
        encoder(torch.zeros(2, 10, 10, 4, dtype=torch.uint8))


@pytest.mark.parametrize(("kind", "space", "words"), [
    ("mlp", ATARI, "'mlp' cannot read observations Box(shape=(4, 84, 84), dtype=uint8)"),
    ("nature_cnn", spaces.Box(-1, 1, (8,), np.float32), "'nature_cnn' cannot read observations Box(shape=(8,)"),
    ("nature_cnn", MINATAR, "at least 36x36 pixels"),
    ("minatar_cnn", spaces.Box(-1, 1, (8,), np.float32), "reads channels-first images"),
])
def test_a_wrong_encoder_for_the_space_is_one_line_naming_the_key(kind, space, words):
    with pytest.raises(ValueError, match=r"policy\.model\.encoder") as err:
        make_encoder(space, EncoderConfig(encoder=kind))
    assert words in str(err.value) and "\n" not in str(err.value)


def test_model_observation_space_from_the_config_keys():
    cfg = SimpleNamespace(obs_shape=(4, 10, 10), obs_dtype="uint8", obs_high=1.0)
    space = model_observation_space(cfg)
    assert space == MINATAR
    assert encoder_kind(space) == "minatar_cnn"
    flat = model_observation_space(SimpleNamespace(obs_shape=4))
    assert flat.shape == (4,) and flat.dtype == np.float32


@pytest.mark.parametrize("dueling", [False, True])
def test_dqn_on_images(dueling):
    model = DQN(ATARI, 6, dueling=dueling)
    q = model(torch.randint(0, 256, (2, 4, 84, 84), dtype=torch.uint8))
    assert q.shape == (2, 6)
    q.sum().backward()
    assert all(p.grad is not None for p in model.parameters())


def test_actor_critics_on_images():
    actor = SquashedGaussianActor(MINATAR, 2, hidden=(64,))
    critic = EnsembleQ(MINATAR, 2, hidden=(32,))
    obs = torch.randint(0, 2, (5, 4, 10, 10), dtype=torch.uint8)
    mean, log_std = actor(obs)
    assert mean.shape == log_std.shape == (5, 2)
    assert critic(obs, torch.zeros(5, 2)).shape == (2, 5)


@pytest.mark.parametrize("model", ["rnd", "icm"])
def test_rnd_and_icm_on_images(model):
    cfg = SimpleNamespace(intrinsic_reward_weight=1.0, learning_rate=1e-3, obs_norm=False,
                          encoder_hidden_size_list=[32], feature_size=16)
    rm = RndRewardModel(cfg, MINATAR) if model == "rnd" else IcmRewardModel(cfg, MINATAR, 3)
    rng = np.random.default_rng(0)
    batch = {"obs": rng.integers(0, 2, (8, 4, 10, 10), dtype=np.uint8),
             "next_obs": rng.integers(0, 2, (8, 4, 10, 10), dtype=np.uint8),
             "action": rng.integers(0, 3, 8), "reward": np.zeros(8, np.float32)}
    rm.train(batch)
    assert np.isfinite(rm.estimate(batch)["reward"]).all()
    assert any(isinstance(m, nn.Conv2d) for net in rm.networks().values() for m in net.modules())
