"""The frame both policy families share: state dicts, the acting state, seeding, observations kept
in their dtype until the encoder, seed-style configs, and a DQN-family member as a small subclass."""
import copy
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

from rlpipe.model import make_encoder
from rlpipe.model.encoders import observation_space
from rlpipe.policy import DQNPolicy, Policy, SACPolicy
from rlpipe.policy.frame import PolicyFrame, model_shapes, observations_to
from rlpipe.policy.q_learning import QLearningPolicy

from . import test_dqn, test_sac

OBS = test_sac.OBS


def dqn_cfg(**model):
    """A seed-style config: only the fields DQN reads (no encoder, adam_betas or precision)."""
    return SimpleNamespace(
        discount_factor=0.9, nstep=1, cuda=False,
        model=SimpleNamespace(**{"obs_shape": 4, "action_shape": 2, "encoder_hidden_size_list": [16],
                                 "dueling": False, **model}),
        learn=SimpleNamespace(learning_rate=0.01, target_update_freq=2, target_theta=None, grad_clip=10.0,
                              double_q=True),
    )


FAMILIES = {
    "dqn": (lambda seed: DQNPolicy(dqn_cfg(), seed=seed), lambda i: test_dqn.make_batch(i), 4),
    "sac": (lambda seed: SACPolicy(test_sac.sac_cfg(), seed=seed), lambda i: test_sac.make_batch(i), OBS),
}


def make(family, seed):
    torch.manual_seed(seed)
    return FAMILIES[family][0](seed)


def trained(family, seed=0, steps=3):
    policy = make(family, seed)
    for i in range(steps):
        policy.learn_mode.forward(FAMILIES[family][1](i))
    return policy


def observations(family, n=6):
    return np.random.default_rng(7).normal(size=(n, FAMILIES[family][2])).astype(np.float32)


def tensors(state):
    """Every tensor of a (nested) state dict, flattened in key order."""
    if isinstance(state, torch.Tensor):
        return [state]
    if isinstance(state, dict):
        return [t for key in sorted(state, key=str) for t in tensors(state[key])]
    if isinstance(state, (list, tuple)):
        return [t for value in state for t in tensors(value)]
    return []


def same_state(a, b):
    ta, tb = tensors(a), tensors(b)
    return len(ta) == len(tb) and all(torch.equal(x, y) for x, y in zip(ta, tb, strict=True))


@pytest.mark.parametrize("family", FAMILIES)
def test_both_families_are_frames_and_policies(family):
    policy = make(family, 0)
    assert isinstance(policy, PolicyFrame) and isinstance(policy, Policy)
    assert policy.train_iter == 0


@pytest.mark.parametrize("family", FAMILIES)
def test_state_dict_round_trip_continues_identically(family):
    policy = trained(family)
    snapshot = copy.deepcopy(policy.state_dict())
    other = make(family, seed=5)
    assert not same_state(other.state_dict(), snapshot)
    other.load_state_dict(snapshot)
    assert same_state(other.state_dict(), snapshot) and other.train_iter == policy.train_iter == 3
    batch = FAMILIES[family][1](9)
    assert other.learn_mode.forward(batch)["total_loss"] == policy.learn_mode.forward(batch)["total_loss"]
    obs = observations(family)
    np.testing.assert_array_equal(other.collect_mode.forward(obs, eps=0.5), policy.collect_mode.forward(obs, eps=0.5))


@pytest.mark.parametrize("family", FAMILIES)
def test_acting_state_carries_what_collect_mode_acts_with_and_nothing_else(family):
    learner = trained(family)
    collector = make(family, seed=5)
    before = copy.deepcopy(collector.state_dict())
    acting = learner.acting_state_dict()
    assert set(acting) == set(type(learner).acting)
    collector.load_acting_state_dict(copy.deepcopy(acting))
    obs = observations(family)
    np.testing.assert_array_equal(collector.eval_mode.forward(obs), learner.eval_mode.forward(obs))
    after = collector.state_dict()
    for name in set(type(collector).checkpointed) - set(type(collector).acting):
        assert same_state(after[name], before[name]), name  # targets and optimizers stay
    assert after["train_iter"] == 0


@pytest.mark.parametrize("family", FAMILIES)
def test_seed_reseeds_exploration_only(family):
    policy = trained(family)
    obs = observations(family)
    policy.seed(11)
    first = policy.collect_mode.forward(obs, eps=0.5)
    policy.seed(11)
    np.testing.assert_array_equal(policy.collect_mode.forward(obs, eps=0.5), first)


@pytest.mark.parametrize("family", FAMILIES)
def test_observations_stay_in_their_dtype_until_the_encoder(family):
    policy = make(family, 0)
    encoder = policy.model.encoder if family == "dqn" else policy.actor.trunk
    seen = []
    encoder.register_forward_pre_hook(lambda module, args: seen.append(args[0].dtype))
    obs = np.random.default_rng(0).integers(0, 3, size=(4, FAMILIES[family][2])).astype(np.uint8)
    as_uint8 = policy.eval_mode.forward(obs)
    assert seen == [torch.uint8]
    np.testing.assert_array_equal(as_uint8, policy.eval_mode.forward(obs.astype(np.float32)))


def test_dqn_learns_identically_from_uint8_and_float32_observations():
    batch = test_dqn.make_batch(0)
    batch["obs"] = np.round(batch["obs"]).clip(0, 3).astype(np.uint8)
    batch["next_obs"] = np.round(batch["next_obs"]).clip(0, 3).astype(np.uint8)
    as_float = {**batch, "obs": batch["obs"].astype(np.float32), "next_obs": batch["next_obs"].astype(np.float32)}
    a, b = make("dqn", 0), make("dqn", 0)
    assert a.learn_mode.forward(batch)["total_loss"] == b.learn_mode.forward(as_float)["total_loss"]
    assert same_state(a.state_dict(), b.state_dict())


@pytest.mark.parametrize("obs_shape", [4, (4,), [4]])
def test_seed_style_namespace_builds_dqn_with_any_spelling_of_a_vector_shape(obs_shape):
    torch.manual_seed(0)
    policy = DQNPolicy(dqn_cfg(obs_shape=obs_shape))
    torch.manual_seed(0)
    reference = DQNPolicy(dqn_cfg())
    assert same_state(policy.model.state_dict(), reference.model.state_dict())
    out = policy.learn_mode.forward({key: torch.as_tensor(value) for key, value in test_dqn.make_batch(0).items()})
    assert isinstance(out["total_loss"], float) and out["priority"].shape == (16,)


# ---- a DQN-family member is a head, a loss and (here) its action values ------------------
class QuantileNet(nn.Module):
    def __init__(self, obs_shape, n_actions, hidden, n_quantiles):
        super().__init__()
        self.encoder, n = make_encoder(observation_space(obs_shape), SimpleNamespace(encoder_hidden_size_list=hidden))
        self.head = nn.Linear(n, n_actions * n_quantiles)
        self.shape = (n_actions, n_quantiles)

    def forward(self, obs):
        return self.head(self.encoder(obs)).reshape(-1, *self.shape)  # [B, A, N]


class TinyQuantileDQN(QLearningPolicy):
    """Quantile regression targets (Dabney et al., 2018), squared-error flavour: a network, action values
    and a learning step on the frame's helpers are enough."""

    def build_model(self, model_cfg):
        obs_shape, n_actions = model_shapes(model_cfg)
        return QuantileNet(obs_shape, n_actions, model_cfg.encoder_hidden_size_list, n_quantiles=5)

    def q_values(self, output):
        return output.mean(dim=-1)

    def _forward_learn(self, batch):
        b = self._learn_batch(batch)
        with torch.no_grad():
            next_z = self.target_model(b.next_obs)
            next_z_best = next_z[torch.arange(len(b.action)), self.q_values(next_z).argmax(dim=1)]  # [B, N]
            target = b.reward[:, None] + b.value_gamma * (1.0 - b.terminated[:, None]) * next_z_best
        z = self.model(b.obs)
        z_sa = z[torch.arange(len(b.action)), b.action]
        error = target[:, None, :] - z_sa[:, :, None]  # [B, N, N]
        loss = error.square().mean()
        self._gradient_step(loss)
        return self._learn_output(loss, self.q_values(z), error.detach().abs().mean(dim=(1, 2)))


def test_a_new_dqn_family_member_is_a_small_subclass():
    torch.manual_seed(0)
    policy = TinyQuantileDQN(dqn_cfg(), seed=0)
    out = policy.learn_mode.forward(test_dqn.make_batch(0))
    assert set(out) == {"total_loss", "q_value", "priority", "cur_lr"} and out["priority"].shape == (16,)
    actions = policy.eval_mode.forward(observations("dqn"))
    assert actions.dtype == np.int64 and set(actions) <= {0, 1}
    clone = TinyQuantileDQN(dqn_cfg(), seed=1)
    clone.load_state_dict(copy.deepcopy(policy.state_dict()))
    assert clone.train_iter == 1 and same_state(clone.model.state_dict(), policy.model.state_dict())


def critic_loss_of_first_update(family, reward_scale, reward_factor):
    """The TD loss of a fresh policy's first update (``learn.reward_scale`` set) on batch 0's rewards
    times ``reward_factor``."""
    torch.manual_seed(0)
    if family == "dqn":
        cfg = dqn_cfg()
        cfg.learn.reward_scale = reward_scale
        policy, loss = DQNPolicy(cfg, seed=0), "total_loss"
    else:
        policy, loss = SACPolicy(test_sac.sac_cfg(reward_scale=reward_scale), seed=0), "critic_loss"
    batch = FAMILIES[family][1](0)
    batch["reward"] = batch["reward"] * reward_factor
    return policy.learn_mode.forward(batch)[loss]


@pytest.mark.parametrize("family", FAMILIES)
def test_reward_scale_learns_from_scaled_rewards(family):
    """``learn.reward_scale`` k on rewards r is the update of rewards k r, and not the update of r."""
    scaled = critic_loss_of_first_update(family, 7.0, 1.0)
    assert scaled == pytest.approx(critic_loss_of_first_update(family, 1.0, 7.0), rel=1e-5)
    assert scaled != pytest.approx(critic_loss_of_first_update(family, 1.0, 1.0), rel=1e-3)
    with pytest.raises(ValueError, match="reward_scale"):
        critic_loss_of_first_update(family, 0.0, 1.0)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_read_only_observations_are_copied_not_shared(family):
    """A dataset's observations are a read-only memory map: torch would share it (with a warning, once
    per process, that writes are undefined), so it is copied; a writable array is still shared.
    Acting on either gives the same actions."""
    policy = make(family, 0)
    obs = np.random.default_rng(0).normal(size=(5, FAMILIES[family][2])).astype(np.float32)
    read_only = obs.copy()
    read_only.flags.writeable = False
    assert observations_to(obs, torch.device("cpu")).data_ptr() == obs.ctypes.data
    assert observations_to(read_only, torch.device("cpu")).data_ptr() != read_only.ctypes.data
    np.testing.assert_array_equal(policy.eval_mode.forward(read_only), policy.eval_mode.forward(obs))
