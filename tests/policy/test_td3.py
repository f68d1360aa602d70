import copy
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from rlpipe.policy import (
    DDPGPolicy,
    Policy,
    TD3Policy,
    td3_actor_loss,
    td3_critic_loss,
    td3_target_action,
    td3_td_target,
)

from .batches import continuous_batch

OBS, ACT = 3, 2


# ---- the pure update rule ------------------------------------------------------------
def test_target_smoothing_noise_is_clipped_then_the_action():
    next_action = torch.tensor([[0.0, 0.9], [-0.2, 0.1], [0.3, -0.95]])
    noise = torch.tensor([[2.0, 0.05], [-3.0, 0.3], [0.4, -0.5]])
    smoothed = td3_target_action(next_action, noise, noise_clip=0.5)
    # noise -> [[0.5, 0.05], [-0.5, 0.3], [0.4, -0.5]], then the sum clipped to [-1, 1]
    torch.testing.assert_close(smoothed, torch.tensor([[0.5, 0.95], [-0.7, 0.4], [0.7, -1.0]]))
    assert (smoothed - next_action).abs().max() <= 0.5 + 1e-6


def test_td_target_min_of_critics_terminated_vs_truncated():
    target_q = torch.tensor([[4.0, 2.0, 1.0], [3.0, 5.0, 0.0]])
    reward = torch.tensor([1.0, -1.0, 0.5])
    terminated = torch.tensor([0.0, 1.0, 0.0])  # row 2: truncated or not, it bootstraps
    td_target = td3_td_target(reward, terminated, torch.tensor([0.5, 0.5, 0.25]), target_q)
    torch.testing.assert_close(td_target, torch.tensor([1.0 + 1.5, -1.0, 0.5]))
    # one critic (DDPG): its own value
    torch.testing.assert_close(td3_td_target(reward, terminated, 0.5, target_q[1:]),
                               torch.tensor([2.5, -1.0, 0.5]))


def test_critic_loss_weights_and_actor_loss():
    q = torch.tensor([[1.0, 2.0], [0.0, 4.0]], requires_grad=True)
    td_target = torch.tensor([2.0, 2.0])
    loss, td_error = td3_critic_loss(q, td_target)
    assert loss.item() == pytest.approx(1 / 2 + (4 + 4) / 2)
    torch.testing.assert_close(td_error, torch.tensor([[1.0, 0.0], [2.0, -2.0]]))
    weighted, _ = td3_critic_loss(q, td_target, torch.tensor([3.0, 0.5]))
    assert weighted.item() == pytest.approx(3 / 2 + (12 + 2) / 2)
    assert td3_actor_loss(torch.tensor([1.0, 3.0])).item() == -2.0


# ---- the policies --------------------------------------------------------------------
def make_cfg(hidden=(32, 32), nstep=1, explore=0.1, ddpg=False, **learn):
    fields = dict(learning_rate_actor=1e-3, learning_rate_q=1e-3, target_theta=0.05, grad_clip=10.0)
    if not ddpg:  # DDPG must build without the TD3-only fields
        fields.update(actor_update_freq=2, noise_sigma=0.2, noise_clip=0.5)
    fields.update(learn)
    return SimpleNamespace(
        discount_factor=0.9, nstep=nstep, cuda=False,
        model=SimpleNamespace(obs_shape=OBS, action_shape=ACT, encoder_hidden_size_list=list(hidden)),
        learn=SimpleNamespace(**fields),
        collect=SimpleNamespace(noise_sigma=explore),
    )


def make_batch(seed, size=16, **extra):
    return continuous_batch(seed, OBS, ACT, size, **extra)


def make_policy(cls=TD3Policy, cfg=None, seed=0):
    torch.manual_seed(seed)
    return cls(cfg if cfg is not None else make_cfg(ddpg=cls is DDPGPolicy), seed=seed)


def params(module):
    return [p.detach().clone() for p in module.parameters()]


def same(a, b):
    return all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


def unsmoothed_td_target(policy, batch):
    """``td_target`` of the next step when the target action is ``mu'(s')`` itself."""
    t = {k: torch.as_tensor(v, dtype=torch.float32) for k, v in batch.items()}
    with torch.no_grad():
        target_q = policy.target_critic(t["next_obs"], policy.target_actor(t["next_obs"]))
        return td3_td_target(t["reward"], t["terminated"], t.get("value_gamma", 0.9), target_q)


def unsmoothed_td_error(policy, batch):
    with torch.no_grad():
        q = policy.critic(torch.as_tensor(batch["obs"]), torch.as_tensor(batch["action"]))
    return unsmoothed_td_target(policy, batch) - q


def test_policies_satisfy_the_protocol_with_their_critics():
    td3, ddpg = make_policy(), make_policy(DDPGPolicy)
    assert isinstance(td3, Policy) and isinstance(ddpg, Policy)
    assert td3.critic.n_critics == 2 and ddpg.critic.n_critics == 1


def test_actor_and_targets_update_only_every_actor_update_freq_steps():
    policy = make_policy(cfg=make_cfg(actor_update_freq=3))
    actor, target_actor, target_critic = params(policy.actor), params(policy.target_actor), params(policy.target_critic)
    for i in range(2):
        critic = params(policy.critic)
        out = policy.learn_mode.forward(make_batch(i))
        assert "actor_loss" not in out and out["total_loss"] == out["critic_loss"]
        assert not same(critic, params(policy.critic))
        assert same(actor, params(policy.actor))
        assert same(target_actor, params(policy.target_actor)) and same(target_critic, params(policy.target_critic))
    out = policy.learn_mode.forward(make_batch(2))
    assert out["total_loss"] == pytest.approx(out["critic_loss"] + out["actor_loss"])
    assert not same(actor, params(policy.actor))
    expected = [0.95 * t + 0.05 * o for t, o in zip(target_actor, params(policy.actor), strict=True)]
    for got, want in zip(params(policy.target_actor), expected, strict=True):
        torch.testing.assert_close(got, want)
    assert not same(target_critic, params(policy.target_critic))
    assert policy.train_iter == 3


def test_ddpg_updates_the_actor_every_step_without_smoothing():
    policy = make_policy(DDPGPolicy)
    batch = make_batch(0)
    td_error = unsmoothed_td_error(policy, batch)
    out = policy.learn_mode.forward(batch)
    assert "actor_loss" in out
    np.testing.assert_allclose(out["priority"], td_error.abs().mean(0).numpy(), rtol=1e-5)


def test_smoothing_noise_clipped_to_zero_gives_the_plain_target():
    policy = make_policy(cfg=make_cfg(noise_sigma=5.0, noise_clip=0.0))
    batch = make_batch(1)
    td_error = unsmoothed_td_error(policy, batch)
    out = policy.learn_mode.forward(batch)
    assert out["priority"].dtype == np.float32 and out["priority"].shape == (16,)
    np.testing.assert_allclose(out["priority"], td_error.abs().mean(0).numpy(), rtol=1e-5)
    # with noise allowed through, the target (hence the priority) changes
    noisy = make_policy(cfg=make_cfg(noise_sigma=5.0, noise_clip=0.5))
    assert not np.allclose(noisy.learn_mode.forward(batch)["priority"], out["priority"])


def test_terminated_rows_target_the_reward_and_truncated_rows_bootstrap():
    policy = make_policy(DDPGPolicy)
    terminated = np.array([True] * 4 + [False] * 4)
    batch = make_batch(2, size=8, terminated=terminated, truncated=~terminated)
    with torch.no_grad():
        q = policy.critic(torch.as_tensor(batch["obs"]), torch.as_tensor(batch["action"]))[0].numpy()
    td_error = unsmoothed_td_error(policy, batch)[0].numpy()
    priority = policy.learn_mode.forward(batch)["priority"]
    np.testing.assert_allclose(priority[:4], np.abs(batch["reward"][:4] - q[:4]), rtol=1e-5)
    np.testing.assert_allclose(priority[4:], np.abs(td_error[4:]), rtol=1e-5)
    assert not np.allclose(priority[4:], np.abs(batch["reward"][4:] - q[4:]))


def test_importance_weights_scale_the_critic_loss():
    policy = make_policy()
    twin = copy.deepcopy(policy)
    plain = policy.learn_mode.forward(make_batch(3))
    tripled = twin.learn_mode.forward(make_batch(3, weight=np.full(16, 3.0, dtype=np.float32)))
    assert tripled["critic_loss"] == pytest.approx(3 * plain["critic_loss"], rel=1e-5)
    fresh = make_policy()
    before = params(fresh.critic)
    fresh.learn_mode.forward(make_batch(3, weight=np.zeros(16, dtype=np.float32)))
    assert same(before, params(fresh.critic))


def test_actor_step_leaves_no_critic_weight_gradients():
    policy = make_policy(DDPGPolicy)
    twin = copy.deepcopy(policy)
    batch = make_batch(4)
    policy.learn_mode.forward(batch)
    # the grads of the critic loss alone, on the copy: the actor step added nothing
    q = twin.critic(torch.as_tensor(batch["obs"]), torch.as_tensor(batch["action"]))
    td3_critic_loss(q, unsmoothed_td_target(twin, batch))[0].backward()
    for got, want in zip(policy.critic.parameters(), twin.critic.parameters(), strict=True):
        torch.testing.assert_close(got.grad, want.grad)
    assert all(p.requires_grad for p in policy.critic.parameters())


def test_value_gamma_column_and_nstep_without_it():
    policy = make_policy(DDPGPolicy)
    batch = make_batch(5, value_gamma=np.full(16, 0.25, dtype=np.float32))
    td_error = unsmoothed_td_error(policy, batch)
    np.testing.assert_allclose(policy.learn_mode.forward(batch)["priority"], td_error.abs().mean(0).numpy(),
                               rtol=1e-5)
    with pytest.raises(ValueError, match="value_gamma"):
        make_policy(cfg=make_cfg(nstep=3)).learn_mode.forward(make_batch(0))


def test_collect_adds_clipped_seeded_noise_and_eval_is_deterministic():
    policy = make_policy(cfg=make_cfg(explore=0.5))
    obs = make_batch(0, size=400)["obs"]
    greedy = policy.eval_mode.forward(obs)
    assert greedy.dtype == np.float32 and greedy.shape == (400, ACT)
    with torch.no_grad():
        np.testing.assert_array_equal(greedy, policy.actor(torch.as_tensor(obs)).numpy())
    policy.seed(4)
    action = policy.collect_mode.forward(obs, eps=0.3)  # eps is accepted and ignored
    assert action.dtype == np.float32 and np.abs(action).max() <= 1.0
    inside = np.abs(action) < 1.0  # rows the clip did not touch carry the raw noise
    assert np.std((action - greedy)[inside]) == pytest.approx(0.5, rel=0.15)
    policy.seed(4)
    np.testing.assert_array_equal(action, policy.collect_mode.forward(obs))

    quiet = make_policy(cfg=make_cfg(explore=0.0))
    np.testing.assert_array_equal(quiet.collect_mode.forward(obs), quiet.eval_mode.forward(obs))
    assert all(p.grad is None for p in quiet.actor.parameters())


def test_state_dict_round_trip_continues_identically():
    cfg = make_cfg(actor_update_freq=2)
    policy = make_policy(cfg=cfg)
    for i in range(3):
        policy.learn_mode.forward(make_batch(i))
    policy.collect_mode.forward(make_batch(0)["obs"])
    snapshot = copy.deepcopy(policy.state_dict())

    restored = make_policy(cfg=cfg, seed=99)
    restored.load_state_dict(snapshot)
    assert restored.train_iter == 3
    obs = make_batch(9, size=32)["obs"]
    np.testing.assert_array_equal(policy.collect_mode.forward(obs), restored.collect_mode.forward(obs))
    for i in range(3, 6):
        a, b = policy.learn_mode.forward(make_batch(i)), restored.learn_mode.forward(make_batch(i))
        assert a.keys() == b.keys() and a["total_loss"] == b["total_loss"]
        np.testing.assert_array_equal(a["priority"], b["priority"])
    for name in ("actor", "critic", "target_actor", "target_critic"):
        assert same(params(getattr(policy, name)), params(getattr(restored, name)))


def one_step_bandit_batches(n, size=128, seed=0):
    """One state, actions uniform in [-1, 1], r = -(a - 0.5)^2, every transition terminal."""
    rng = np.random.default_rng(seed)
    obs = np.tile(np.float32([0.5, -1.0, 2.0]), (size, 1))
    for _ in range(n):
        action = rng.uniform(-1, 1, size=(size, 1)).astype(np.float32)
        yield {"obs": obs, "action": action, "reward": -((action[:, 0] - 0.5) ** 2), "next_obs": obs,
               "terminated": np.ones(size, dtype=bool)}


@pytest.mark.parametrize(("cls", "learning_rate_actor"), [(TD3Policy, 3e-4), (DDPGPolicy, 1e-3)])
def test_learns_the_best_action_of_a_one_step_reward(cls, learning_rate_actor):
    cfg = make_cfg(hidden=(64, 64), ddpg=cls is DDPGPolicy, learning_rate_actor=learning_rate_actor,
                   learning_rate_q=1e-2)
    cfg.model.action_shape = 1
    policy = make_policy(cls, cfg)
    for batch in one_step_bandit_batches(300):
        policy.learn_mode.forward(batch)
    np.testing.assert_allclose(policy.eval_mode.forward(batch["obs"][:1]), 0.5, atol=0.1)


def test_missing_fields_are_errors():
    cfg = make_cfg()
    cfg.model.action_shape = None
    with pytest.raises(ValueError, match=r"cfg.model.obs_shape"):
        TD3Policy(cfg)
    with pytest.raises(ValueError, match="target_theta"):
        DDPGPolicy(make_cfg(ddpg=True, target_theta=None))
    with pytest.raises(AttributeError, match="actor_update_freq"):
        TD3Policy(make_cfg(ddpg=True))
