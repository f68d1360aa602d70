"""RND and ICM read observations through encoders: any dtype, converted to float32 by the networks."""
import numpy as np
import pytest
import torch

from rlpipe.reward_model import IcmRewardModel, RndRewardModel

from .test_intrinsic import N_ACTIONS, OBS, rm_cfg, transitions


def make(kind, obs_norm):
    torch.manual_seed(0)
    cfg = rm_cfg(type=kind, obs_norm=obs_norm)
    return RndRewardModel(cfg, (OBS,)) if kind == "rnd" else IcmRewardModel(cfg, OBS, N_ACTIONS)


@pytest.mark.parametrize("kind", ["rnd", "icm"])
@pytest.mark.parametrize("obs_norm", [False, True])
def test_uint8_observations_train_and_reward_as_their_float32_values(kind, obs_norm):
    batch = transitions(16)
    small = {**batch, "obs": np.abs(batch["obs"] * 3).astype(np.uint8),
             "next_obs": np.abs(batch["next_obs"] * 3).astype(np.uint8)}
    as_float = {**small, "obs": small["obs"].astype(np.float32), "next_obs": small["next_obs"].astype(np.float32)}
    a, b = make(kind, obs_norm), make(kind, obs_norm)
    a.train(small)
    b.train(as_float)
    np.testing.assert_array_equal(a.estimate(small)["reward"], b.estimate(as_float)["reward"])
    for x, y in zip(a.optimizer.param_groups[0]["params"], b.optimizer.param_groups[0]["params"], strict=True):
        assert torch.equal(x, y)


def test_networks_keep_their_state_dict_names():
    model = make("rnd", False)
    assert list(model.state_dict()["networks"]["target"]) == ["0.weight", "0.bias", "2.weight", "2.bias"]
