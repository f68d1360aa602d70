import copy
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from rlpipe.policy import Policy, SACPolicy, sac_actor_loss, sac_alpha_loss, sac_critic_loss, sac_td_target

from .batches import continuous_batch

OBS, ACT = 3, 2


# ---- the pure losses on hand-made tensors (n=2 critics, B=3) -------------------------
def test_td_target_terminated_stops_bootstrap_truncated_bootstraps():
    target_q = torch.tensor([[4.0, 2.0, 1.0], [3.0, 5.0, 0.0]])  # min over critics: [3, 2, 0]
    next_log_pi = torch.tensor([-1.0, 0.5, 2.0])
    reward = torch.tensor([1.0, -1.0, 0.5])
    terminated = torch.tensor([0.0, 1.0, 0.0])  # row 2 may be truncated: it still bootstraps
    td_target = sac_td_target(reward, terminated, 0.5, target_q, next_log_pi, alpha=0.1)
    # soft values: [3 + 0.1, 2 - 0.05, 0 - 0.2]
    torch.testing.assert_close(td_target, torch.tensor([1.0 + 0.5 * 3.1, -1.0, 0.5 + 0.5 * -0.2]))


def test_td_target_per_sample_value_gamma():
    target_q = torch.ones(2, 2)
    td_target = sac_td_target(torch.zeros(2), torch.zeros(2), torch.tensor([0.5, 0.25]), target_q,
                              torch.zeros(2), alpha=1.0)
    torch.testing.assert_close(td_target, torch.tensor([0.5, 0.25]))


def test_critic_loss_sums_critics_and_weights_samples():
    q = torch.tensor([[1.0, 2.0, 3.0], [0.0, 2.0, 5.0]], requires_grad=True)
    td_target = torch.tensor([2.0, 2.0, 3.0])
    loss, td_error = sac_critic_loss(q, td_target)
    torch.testing.assert_close(td_error, torch.tensor([[1.0, 0.0, 0.0], [2.0, 0.0, -2.0]]))
    assert loss.item() == pytest.approx(0.5 * (1 / 3 + 8 / 3))
    weighted, _ = sac_critic_loss(q, td_target, torch.tensor([2.0, 1.0, 0.5]))
    assert weighted.item() == pytest.approx(0.5 * (2 / 3 + (8 + 2) / 3))
    weighted.backward()
    # d/dq = -w * td_error / B
    torch.testing.assert_close(q.grad, torch.tensor([[-2 / 3, 0.0, 0.0], [-4 / 3, 0.0, 1 / 3]]))
    assert not td_error.requires_grad


def test_actor_loss_uses_the_smaller_critic():
    q_pi = torch.tensor([[1.0, 5.0], [2.0, 3.0]], requires_grad=True)
    log_pi = torch.tensor([0.5, -1.0], requires_grad=True)
    loss = sac_actor_loss(q_pi, log_pi, alpha=0.2)
    assert loss.item() == pytest.approx(((0.1 - 1.0) + (-0.2 - 3.0)) / 2)
    loss.backward()
    torch.testing.assert_close(q_pi.grad, torch.tensor([[-0.5, 0.0], [0.0, -0.5]]))
    torch.testing.assert_close(log_pi.grad, torch.tensor([0.1, 0.1]))


@pytest.mark.parametrize(("log_pi", "alpha_rises"), [(3.0, True), (-3.0, False)])
def test_temperature_rises_when_entropy_is_below_target(log_pi, alpha_rises):
    # target entropy -2: log_pi = 3 means entropy -3 < -2 (too little) -> alpha must rise;
    # log_pi = -3 means entropy 3 > -2 (more than enough) -> alpha must fall.
    log_alpha = torch.tensor(math.log(0.2), requires_grad=True)
    log_pi_t = torch.full((4,), log_pi, requires_grad=True)
    loss = sac_alpha_loss(log_alpha, log_pi_t, target_entropy=-2.0)
    loss.backward()
    assert log_alpha.grad.item() == pytest.approx(-(log_pi - 2.0))
    assert (log_alpha.grad.item() < 0) == alpha_rises  # descent moves against the gradient
    assert log_pi_t.grad is None


# ---- the policy ----------------------------------------------------------------------
def sac_cfg(hidden=(32, 32), nstep=1, **learn):
    fields = dict(
        learning_rate_actor=1e-3, learning_rate_q=1e-3, learning_rate_alpha=1e-3, target_theta=0.05,
        grad_clip=10.0, alpha=0.2, auto_alpha=True, target_entropy=None,
    )
    fields.update(learn)
    return SimpleNamespace(
        discount_factor=0.9, nstep=nstep, cuda=False,
        model=SimpleNamespace(obs_shape=OBS, action_shape=ACT, encoder_hidden_size_list=list(hidden)),
        learn=SimpleNamespace(**fields),
    )


def make_batch(seed, size=16, **extra):
    return continuous_batch(seed, OBS, ACT, size, **extra)


def make_policy(cfg=None, seed=0):
    torch.manual_seed(seed)
    return SACPolicy(cfg if cfg is not None else sac_cfg(), seed=seed)


def params(module):
    return [p.detach().clone() for p in module.parameters()]


def assert_same(a, b):
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


def expected_critic_step(policy, batch):
    """Critic loss, td_error and critic grads of the next learn step, from a copy of the policy."""
    twin = copy.deepcopy(policy)
    t = {k: torch.as_tensor(v, dtype=torch.float32) for k, v in batch.items()}
    alpha = twin.log_alpha.detach().exp()
    with torch.no_grad():
        next_action, next_log_pi = twin.actor.sample(t["next_obs"], twin._rng.learn)
        td_target = sac_td_target(t["reward"], t["terminated"], t.get("value_gamma", 0.9),
                                  twin.target_critic(t["next_obs"], next_action), next_log_pi, alpha)
    loss, td_error = sac_critic_loss(twin.critic(t["obs"], t["action"]), td_target, t.get("weight"))
    loss.backward()
    return loss.item(), td_error, [p.grad for p in twin.critic.parameters()]


def test_policy_satisfies_the_protocol_and_learn_output():
    policy = make_policy()
    assert isinstance(policy, Policy)
    batch = make_batch(1)
    loss, td_error, _ = expected_critic_step(policy, batch)
    out = policy.learn_mode.forward(batch)
    assert set(out) >= {"total_loss", "critic_loss", "actor_loss", "alpha_loss", "alpha", "entropy", "q_value",
                        "priority", "cur_lr_actor", "cur_lr_q"}
    assert out["critic_loss"] == pytest.approx(loss, rel=1e-6)
    assert out["total_loss"] == pytest.approx(out["critic_loss"] + out["actor_loss"])
    assert out["priority"].dtype == np.float32 and out["priority"].shape == (16,)
    np.testing.assert_allclose(out["priority"], td_error.abs().mean(0).numpy(), rtol=1e-6)
    assert out["alpha"] == pytest.approx(0.2)
    assert out["cur_lr_actor"] == pytest.approx(1e-3) and out["cur_lr_q"] == pytest.approx(1e-3)
    assert policy.train_iter == 1


def test_terminated_rows_target_the_reward_and_truncated_rows_bootstrap():
    policy = make_policy()
    size = 8
    terminated = np.array([True] * 4 + [False] * 4)
    batch = make_batch(2, size=size, terminated=terminated, truncated=~terminated)
    obs, action = torch.as_tensor(batch["obs"]), torch.as_tensor(batch["action"])
    with torch.no_grad():
        q = policy.critic(obs, action)
    _, td_error, _ = expected_critic_step(policy, batch)
    out = policy.learn_mode.forward(batch)
    reward = torch.as_tensor(batch["reward"])
    # terminated rows: td_target is the reward alone
    np.testing.assert_allclose(out["priority"][:4], (reward[:4] - q[:, :4]).abs().mean(0).numpy(), rtol=1e-5)
    # truncated-only rows bootstrap: td_target differs from the reward
    np.testing.assert_allclose(out["priority"][4:], td_error[:, 4:].abs().mean(0).numpy(), rtol=1e-5)
    assert not np.allclose(out["priority"][4:], (reward[4:] - q[:, 4:]).abs().mean(0).numpy())


def test_actor_step_leaves_no_critic_weight_gradients():
    policy = make_policy()
    batch = make_batch(3)
    _, _, critic_grads = expected_critic_step(policy, batch)
    policy.learn_mode.forward(batch)
    # the critics' grads are those of the critic loss alone: the actor step added nothing
    for got, want in zip((p.grad for p in policy.critic.parameters()), critic_grads, strict=True):
        torch.testing.assert_close(got, want)
    assert all(p.requires_grad for p in policy.critic.parameters())


def test_importance_weights_scale_the_critic_loss():
    policy = make_policy()
    twin = copy.deepcopy(policy)
    plain = policy.learn_mode.forward(make_batch(4))
    doubled = twin.learn_mode.forward(make_batch(4, weight=np.full(16, 2.0, dtype=np.float32)))
    assert doubled["critic_loss"] == pytest.approx(2 * plain["critic_loss"], rel=1e-5)

    fresh = make_policy()  # Adam's momentum would move the critics even under zero gradients
    before = params(fresh.critic)
    out = fresh.learn_mode.forward(make_batch(5, weight=np.zeros(16, dtype=np.float32)))
    assert out["critic_loss"] == 0.0
    assert_same(before, params(fresh.critic))


def test_value_gamma_column_and_nstep_without_it():
    policy = make_policy()
    batch = make_batch(6, value_gamma=np.full(16, 0.25, dtype=np.float32))
    _, td_error, _ = expected_critic_step(policy, batch)
    np.testing.assert_allclose(policy.learn_mode.forward(batch)["priority"], td_error.abs().mean(0).numpy(),
                               rtol=1e-6)
    with pytest.raises(ValueError, match="value_gamma"):
        make_policy(sac_cfg(nstep=3)).learn_mode.forward(make_batch(0))


def test_soft_target_update_every_step():
    policy = make_policy()
    old_target = params(policy.target_critic)
    policy.learn_mode.forward(make_batch(7))
    expected = [0.95 * t + 0.05 * c for t, c in zip(old_target, params(policy.critic), strict=True)]
    for got, want in zip(params(policy.target_critic), expected, strict=True):
        torch.testing.assert_close(got, want)


def test_temperature_learned_or_fixed():
    auto = make_policy(sac_cfg(learning_rate_alpha=0.01))
    out = auto.learn_mode.forward(make_batch(8))
    # target_entropy None means -action_dim
    assert out["alpha_loss"] == pytest.approx(-math.log(0.2) * (-out["entropy"] - ACT), rel=1e-5)
    # Adam's first step moves log_alpha by its own learning rate against the gradient's sign
    # (the temperature shares the actor's optimizer as a parameter group with its own rate).
    gradient = out["entropy"] + ACT
    assert math.log(auto.alpha) == pytest.approx(math.log(0.2) - 0.01 * math.copysign(1.0, gradient), abs=1e-5)

    fixed = make_policy(sac_cfg(auto_alpha=False, alpha=0.05))
    for i in range(3):
        out = fixed.learn_mode.forward(make_batch(i))
    assert "alpha_loss" not in out and out["alpha"] == pytest.approx(0.05) and fixed.alpha == pytest.approx(0.05)
    optimized = [p for group in fixed.actor_optimizer.param_groups for p in group["params"]]
    assert not fixed.log_alpha.requires_grad and all(p is not fixed.log_alpha for p in optimized)


def test_missing_model_shapes_and_target_theta_are_errors():
    cfg = sac_cfg()
    cfg.model.obs_shape = None
    with pytest.raises(ValueError, match=r"cfg.model.obs_shape"):
        SACPolicy(cfg)
    with pytest.raises(ValueError, match="target_theta"):
        SACPolicy(sac_cfg(target_theta=None))


def test_collect_samples_in_bounds_seeded_and_eval_is_tanh_mean():
    policy = make_policy()
    obs = make_batch(0, size=500)["obs"]
    policy.seed(3)
    action = policy.collect_mode.forward(obs, eps=0.7)  # eps is accepted and ignored
    assert action.dtype == np.float32 and action.shape == (500, ACT)
    assert np.abs(action).max() <= 1.0
    policy.seed(3)
    np.testing.assert_array_equal(action, policy.collect_mode.forward(obs))
    assert not np.array_equal(action, policy.collect_mode.forward(obs))

    greedy = policy.eval_mode.forward(obs)
    assert greedy.dtype == np.float32
    np.testing.assert_array_equal(greedy, policy.eval_mode.forward(obs))
    with torch.no_grad():
        mean, _ = policy.actor(torch.as_tensor(obs))
    np.testing.assert_allclose(greedy, torch.tanh(mean).numpy(), rtol=1e-6)
    assert all(p.grad is None for p in policy.actor.parameters())


def test_state_dict_round_trip_continues_identically():
    policy = make_policy()
    for i in range(3):
        policy.learn_mode.forward(make_batch(i))
    policy.collect_mode.forward(make_batch(0)["obs"])
    snapshot = copy.deepcopy(policy.state_dict())

    restored = make_policy(seed=123)
    restored.load_state_dict(snapshot)
    assert restored.train_iter == 3 and restored.alpha == policy.alpha
    obs = make_batch(9, size=32)["obs"]
    np.testing.assert_array_equal(policy.collect_mode.forward(obs), restored.collect_mode.forward(obs))
    for i in range(3, 6):
        a = policy.learn_mode.forward(make_batch(i))
        b = restored.learn_mode.forward(make_batch(i))
        assert a["total_loss"] == b["total_loss"] and a["alpha"] == b["alpha"]
        np.testing.assert_array_equal(a["priority"], b["priority"])
    for name in ("actor", "critic", "target_critic"):
        assert_same(params(getattr(policy, name)), params(getattr(restored, name)))
    np.testing.assert_array_equal(policy.collect_mode.forward(obs), restored.collect_mode.forward(obs))


def one_step_bandit_batches(n, size=128, seed=0):
    """One state, actions uniform in [-1, 1], r = -(a - 0.5)^2, every transition terminal."""
    rng = np.random.default_rng(seed)
    obs = np.tile(np.float32([0.5, -1.0, 2.0]), (size, 1))
    for _ in range(n):
        action = rng.uniform(-1, 1, size=(size, 1)).astype(np.float32)
        yield {"obs": obs, "action": action, "reward": -((action[:, 0] - 0.5) ** 2), "next_obs": obs,
               "terminated": np.ones(size, dtype=bool)}


def test_learns_the_best_action_of_a_one_step_reward():
    cfg = sac_cfg(hidden=(64, 64), learning_rate_actor=3e-4, learning_rate_q=1e-2, auto_alpha=False, alpha=0.01)
    cfg.model.action_shape = 1
    policy = make_policy(cfg)
    for batch in one_step_bandit_batches(300):
        policy.learn_mode.forward(batch)
    np.testing.assert_allclose(policy.eval_mode.forward(batch["obs"][:1]), 0.5, atol=0.1)


@pytest.mark.parametrize("obs_norm", [False, True])
def test_accepts_torch_tensors(obs_norm):
    cfg = sac_cfg()
    cfg.model.obs_norm = obs_norm
    policy = make_policy(cfg)
    batch = {k: torch.as_tensor(v) for k, v in make_batch(0).items()}  # the seed's data: dicts of tensors
    out = policy.learn_mode.forward(batch)
    assert np.isfinite(out["total_loss"])
    assert policy.collect_mode.forward(batch["obs"]).shape == (16, ACT)
    if obs_norm:
        mean = policy.state_dict()["obs_stats"]["mean"]
        torch.testing.assert_close(mean, batch["obs"].double().mean(0))


def test_obs_norm_feeds_every_network_running_normalised_observations():
    cfg = sac_cfg()
    cfg.model.obs_norm = True
    policy = make_policy(cfg)
    batches = [make_batch(i, size=64) for i in range(3)]
    for batch in batches:
        batch["obs"] = 100.0 + 30.0 * batch["obs"]  # far from the unit scale the networks want
        policy.learn_mode.forward(batch)
    seen = np.concatenate([b["obs"] for b in batches]).astype(np.float64)
    stats = policy.state_dict()["obs_stats"]
    np.testing.assert_allclose(stats["mean"].numpy(), seen.mean(0), rtol=1e-9)
    np.testing.assert_allclose(stats["var"].numpy(), seen.var(0), rtol=1e-9)
    assert stats["count"] == 192

    obs = np.concatenate([batches[0]["obs"][:4], np.full((1, OBS), 1e6, dtype=np.float32)])
    normalised = ((obs - seen.mean(0)) / np.sqrt(seen.var(0) + 1e-8)).clip(-5, 5).astype(np.float32)
    expected = policy.actor.deterministic(torch.as_tensor(normalised)).detach().numpy()
    np.testing.assert_allclose(policy.eval_mode.forward(obs), expected, rtol=1e-5, atol=1e-6)

    restored = make_policy(cfg, seed=5)
    restored.load_state_dict(copy.deepcopy(policy.state_dict()))
    np.testing.assert_array_equal(restored.eval_mode.forward(obs), policy.eval_mode.forward(obs))
    with pytest.raises(ValueError, match="no obs_stats"):
        restored.load_state_dict(make_policy().state_dict())
