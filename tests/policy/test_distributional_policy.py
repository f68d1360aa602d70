"""The frame C51 and QR-DQN share: noisy networks (noise per update and per collect step, none
in eval mode), state and acting-state round trips, Adam's eps, and the seed's API with
priorities going back to a prioritised buffer."""
import copy
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from rlpipe.data import DequeBuffer, PriorityExperienceReplay
from rlpipe.framework import OnlineRLContext
from rlpipe.framework.middleware import OffPolicyLearner
from rlpipe.model.noisy import NoisyLinear, reset_noise
from rlpipe.policy import C51Policy, QRDQNPolicy, c51_loss, categorical_projection

from .test_c51 import batch, c51_cfg
from .test_frame import same_state

OBS = np.random.default_rng(7).normal(size=(6, 3)).astype(np.float32)


def make(kind="c51", seed=0, noisy=True, **learn):
    torch.manual_seed(seed)
    cfg = c51_cfg(dueling=True, noisy=noisy, noisy_sigma0=0.5, num_quantiles=4)
    cfg.learn.kappa = 1.0
    for key, value in learn.items():
        setattr(cfg.learn, key, value)
    return (C51Policy if kind == "c51" else QRDQNPolicy)(cfg, seed=seed)


def noise_of(model):
    return [m.eps_in.clone() for m in model.modules() if isinstance(m, NoisyLinear)]


def same(a, b):
    return all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("kind", ["c51", "qrdqn"])
def test_every_collect_step_draws_new_noise_and_eval_acts_without_it(kind):
    policy = make(kind)
    before = noise_of(policy.model)
    policy.collect_mode.forward(OBS)
    after_one = noise_of(policy.model)
    policy.collect_mode.forward(OBS)
    assert not same(before, after_one) and not same(after_one, noise_of(policy.model))
    with torch.no_grad():
        mean_net = copy.deepcopy(policy.model).eval()
        greedy = policy.q_values(mean_net(torch.as_tensor(OBS))).argmax(dim=1).numpy()
    for _ in range(3):
        policy.collect_mode.forward(OBS)
        np.testing.assert_array_equal(policy.eval_mode.forward(OBS), greedy)
    assert policy.model.training  # eval_mode leaves the network as it found it


def test_every_update_draws_new_noise_for_online_and_target_networks():
    policy = make()
    seen = []
    for _ in range(2):
        policy.learn_mode.forward(batch())
        seen.append((noise_of(policy.model), noise_of(policy.target_model)))
    (online_1, target_1), (online_2, target_2) = seen
    assert not same(online_1, online_2) and not same(target_1, target_2) and not same(online_1, target_1)


def test_an_update_draws_its_noise_from_the_learn_stream_before_its_loss():
    """The noisy C51 step by hand: new noise in both networks from the ``learn`` stream, then the
    projected target of the double-Q bootstrap and the cross-entropy, with that noise."""
    policy = make()
    learn = torch.Generator().set_state(policy._rng.learn.get_state())
    online, target_net = copy.deepcopy(policy.model), copy.deepcopy(policy.target_model)
    reset_noise(online, learn)
    reset_noise(target_net, learn)
    t = {k: torch.as_tensor(v) for k, v in batch().items()}
    with torch.no_grad():
        next_action = policy.q_values(online(t["next_obs"])).argmax(dim=1)
        next_probs = torch.softmax(target_net(t["next_obs"])[torch.arange(6), next_action], dim=-1)
        target = categorical_projection(next_probs, t["reward"], t["terminated"], 0.5, policy.support)
        expected, per_sample = c51_loss(online(t["obs"]), t["action"], target)
    out = policy.learn_mode.forward(batch())
    assert same(noise_of(policy.model), noise_of(online)) and same(noise_of(policy.target_model), noise_of(target_net))
    assert out["total_loss"] == pytest.approx(expected.item(), rel=1e-6)
    np.testing.assert_allclose(out["priority"], per_sample.numpy(), rtol=1e-6)


def test_without_noisy_layers_collect_is_epsilon_greedy_and_noise_free():
    policy = make(noisy=False)
    assert not noise_of(policy.model)
    np.testing.assert_array_equal(policy.collect_mode.forward(OBS), policy.eval_mode.forward(OBS))
    actions = policy.collect_mode.forward(np.repeat(OBS, 50, axis=0), eps=1.0)
    assert set(actions.tolist()) == {0, 1}


def run_on(policy, steps=3):
    out = []
    for _ in range(steps):
        out.append(policy.collect_mode.forward(OBS))
        out.append(policy.learn_mode.forward(batch())["total_loss"])
    return out


@pytest.mark.parametrize("kind", ["c51", "qrdqn"])
def test_state_dict_round_trip_continues_identically(kind):
    policy = make(kind)
    run_on(policy)
    state = copy.deepcopy(policy.state_dict())
    expected = run_on(policy)
    restored = make(kind, seed=9)
    restored.load_state_dict(state)
    got = run_on(restored)
    assert [np.asarray(x).tolist() for x in got] == [np.asarray(x).tolist() for x in expected]
    assert same_state(policy.state_dict(), restored.state_dict())


def test_the_acting_state_is_what_acting_needs():
    policy = make()
    run_on(policy, steps=2)
    acting = policy.acting_state_dict()
    assert set(acting) == {"model"}
    collector = make(seed=5)
    collector.load_acting_state_dict(copy.deepcopy(acting))
    np.testing.assert_array_equal(collector.eval_mode.forward(OBS), policy.eval_mode.forward(OBS))
    assert collector.collect_mode.forward(OBS).shape == (6,)  # draws its own noise


def test_seed_reseeds_the_collect_noise():
    a, b = make(), make()
    a.learn_mode.forward(batch())
    b.load_state_dict(copy.deepcopy(a.state_dict()))
    a.seed(11)
    b.seed(11)
    for _ in range(3):
        np.testing.assert_array_equal(a.collect_mode.forward(OBS), b.collect_mode.forward(OBS))
        assert same(noise_of(a.model), noise_of(b.model))


def test_adam_eps_reaches_the_optimizer():
    assert make(adam_eps=1.5e-4).optimizer.param_groups[0]["eps"] == 1.5e-4
    assert make().optimizer.param_groups[0]["eps"] == 1e-8  # absent from a seed-style config: Adam's


class Recording:
    """A learn mode that remembers each batch's rewards and the priorities it answered."""

    def __init__(self, learn_mode):
        self.learn_mode = learn_mode
        self.seen = []

    def forward(self, data):
        out = self.learn_mode.forward(data)
        self.seen.append((data["reward"].reshape(-1).tolist(), np.asarray(out["priority"]).tolist()))
        return out


@pytest.mark.parametrize("kind", ["c51", "qrdqn"])
def test_the_seed_api_trains_on_tensor_dicts_and_priorities_reach_the_buffer(kind):
    buffer = DequeBuffer(size=32, seed=0)
    buffer.use(PriorityExperienceReplay(buffer, IS_weight=True, priority_power_factor=1.0))
    for i in range(12):
        buffer.push({"obs": torch.full((3,), i / 10), "action": torch.tensor(i % 2), "reward": torch.tensor(float(i)),
                     "next_obs": torch.full((3,), (i + 1) / 10), "terminated": torch.tensor(i % 5 == 4)})
    cfg = SimpleNamespace(policy=SimpleNamespace(learn=SimpleNamespace(batch_size=4, update_per_collect=2),
                                                 collect=SimpleNamespace(unroll_len=1)))
    policy = make(kind)
    learn_mode = Recording(policy.learn_mode)
    ctx = OnlineRLContext()
    OffPolicyLearner(cfg, learn_mode, buffer)(ctx)
    assert ctx.train_iter == 2 and policy.train_iter == 2
    latest = {}
    for rewards, priorities in learn_mode.seen:
        assert all(p > 0 for p in priorities)
        latest.update(zip(rewards, priorities, strict=True))
    for reward, priority in latest.items():
        assert buffer.get(int(reward)).meta["priority"] == pytest.approx(priority, rel=1e-5)


def test_noisy_eval_takes_eps_over_the_means_and_leaves_the_collect_noise_alone():
    """``policy.eval.eps`` applies to noisy networks too (as Dopamine's Rainbow evaluates): eps 0 is the
    means' greedy action, eps 1 uniform, and evaluating draws no collect noise."""
    policy, untouched = make(), make()
    with torch.no_grad():
        greedy = policy.q_values(copy.deepcopy(policy.model).eval()(torch.as_tensor(OBS))).argmax(dim=1).numpy()
    np.testing.assert_array_equal(policy.eval_mode.forward(OBS, eps=0.0), greedy)
    many = np.repeat(OBS[:1], 3000, axis=0)
    actions = policy.eval_mode.forward(many, eps=1.0)
    assert set(actions.tolist()) == set(range(policy.model(torch.as_tensor(OBS)).shape[1]))
    assert policy.model.training
    policy.collect_mode.forward(OBS)
    untouched.collect_mode.forward(OBS)
    assert same(noise_of(policy.model), noise_of(untouched.model))
