import copy
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from rlpipe.config import load_config
from rlpipe.policy import DQNPolicy, Policy, dqn_td_loss

# ---- the pure loss on a hand-made batch (B=3, A=2, gamma=0.5) ------------------------
# q_sa = [2.0, 0.5, 3.0]; online argmax at s' = [0, 1, 1]
Q = [[1.0, 2.0], [0.5, -1.0], [3.0, 0.0]]
Q_NEXT_ONLINE = [[1.0, 0.0], [0.0, 1.0], [2.0, 5.0]]
Q_NEXT_TARGET = [[10.0, 20.0], [4.0, 3.0], [1.0, 7.0]]
ACTION = [1, 0, 0]
REWARD = [1.0, -0.5, -1.0]
TERMINATED = [0.0, 0.0, 1.0]


def loss_of(double_q=True, terminated=TERMINATED, value_gamma=0.5, weight=None):
    q = torch.tensor(Q, requires_grad=True)
    q_next_target = torch.tensor(Q_NEXT_TARGET, requires_grad=True)
    loss, td_error = dqn_td_loss(
        q,
        torch.tensor(Q_NEXT_ONLINE),
        q_next_target,
        torch.tensor(ACTION),
        torch.tensor(REWARD),
        torch.tensor(terminated),
        value_gamma,
        None if weight is None else torch.tensor(weight),
        double_q=double_q,
    )
    return loss, td_error, q, q_next_target


def test_double_q_target_and_huber():
    # q_next = target at online argmax = [10, 3, 7]; td_target = [1 + 5, -0.5 + 1.5, -1 (terminal)]
    loss, td_error, _, _ = loss_of()
    torch.testing.assert_close(td_error, torch.tensor([4.0, 0.5, -4.0]))
    # Huber: |4| - 0.5, 0.5 * 0.5**2, |4| - 0.5
    assert loss.item() == pytest.approx((3.5 + 0.125 + 3.5) / 3)


def test_plain_max_target():
    # q_next = max target = [20, 4, 7]; td_target = [11, 1.5, -1]
    loss, td_error, _, _ = loss_of(double_q=False)
    torch.testing.assert_close(td_error, torch.tensor([9.0, 1.0, -4.0]))
    assert loss.item() == pytest.approx((8.5 + 0.5 + 3.5) / 3)


def test_truncated_transition_is_bootstrapped():
    # same third sample, not terminated: td_target = -1 + 0.5 * 7 = 2.5, td_error = -0.5
    loss, td_error, _, _ = loss_of(terminated=[0.0, 0.0, 0.0])
    torch.testing.assert_close(td_error, torch.tensor([4.0, 0.5, -0.5]))
    assert loss.item() == pytest.approx((3.5 + 0.125 + 0.125) / 3)


def test_per_sample_value_gamma():
    # td_target = [1 + 0.5 * 10, -0.5 + 0.25 * 3, -1]
    loss, td_error, _, _ = loss_of(value_gamma=torch.tensor([0.5, 0.25, 0.125]))
    torch.testing.assert_close(td_error, torch.tensor([4.0, -0.25, -4.0]))
    assert loss.item() == pytest.approx((3.5 + 0.03125 + 3.5) / 3)


def test_importance_weights_scale_each_sample():
    loss, _, _, _ = loss_of(weight=[1.0, 2.0, 0.5])
    assert loss.item() == pytest.approx((3.5 * 1.0 + 0.125 * 2.0 + 3.5 * 0.5) / 3)


def test_gradient_flows_only_through_taken_online_q():
    loss, _, q, q_next_target = loss_of()
    loss.backward()
    assert q_next_target.grad is None
    # d huber / d q_sa = -clip(td_error, -1, 1) / B, only at the taken actions
    expected = torch.tensor([[0.0, -1.0], [-0.5, 0.0], [1.0, 0.0]]) / 3
    torch.testing.assert_close(q.grad, expected)


def test_double_q_without_online_next_q_is_an_error():
    with pytest.raises(ValueError, match="q_next_online"):
        dqn_td_loss(torch.zeros(1, 2), None, torch.zeros(1, 2), torch.zeros(1, dtype=torch.int64),
                    torch.zeros(1), torch.zeros(1), 0.9)


# ---- the policy ----------------------------------------------------------------------
def policy_cfg(**learn):
    return load_config({"policy": {"model": {"obs_shape": 4, "action_shape": 2}, "learn": learn}}).policy


def make_batch(seed, size=16, **extra):
    rng = np.random.default_rng(seed)
    batch = {
        "obs": rng.normal(size=(size, 4)).astype(np.float32),
        "next_obs": rng.normal(size=(size, 4)).astype(np.float32),
        "action": rng.integers(2, size=size).astype(np.int64),
        "reward": rng.normal(size=size).astype(np.float32),
        "terminated": rng.random(size) < 0.3,
        "truncated": rng.random(size) < 0.1,
    }
    batch.update(extra)
    return batch


def make_policy(cfg=None, seed=0):
    torch.manual_seed(seed)
    return DQNPolicy(cfg if cfg is not None else policy_cfg())


def params(module):
    return [p.detach().clone() for p in module.parameters()]


def assert_same(a, b):
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


def test_policy_satisfies_the_protocol_and_builds_from_cfg_model():
    policy = make_policy()
    assert isinstance(policy, Policy)
    assert policy.model(torch.zeros(3, 4)).shape == (3, 2)


def test_adam_betas_reach_the_optimizer():
    assert make_policy().optimizer.param_groups[0]["betas"] == (0.9, 0.999)
    assert make_policy(policy_cfg(adam_betas=[0.5, 0.99])).optimizer.param_groups[0]["betas"] == (0.5, 0.99)


def test_learn_output_and_priority_equals_abs_td_error():
    policy = make_policy()
    batch = make_batch(1)
    model, target = copy.deepcopy(policy.model), copy.deepcopy(policy.target_model)
    out = policy.learn_mode.forward(batch)

    obs, next_obs = torch.as_tensor(batch["obs"]), torch.as_tensor(batch["next_obs"])
    with torch.no_grad():
        expected_loss, td_error = dqn_td_loss(
            model(obs), model(next_obs), target(next_obs), torch.as_tensor(batch["action"]),
            torch.as_tensor(batch["reward"]), torch.as_tensor(batch["terminated"]).float(), 0.99,
        )
    assert set(out) >= {"total_loss", "q_value", "priority", "cur_lr"}
    assert out["priority"].dtype == np.float32 and out["priority"].shape == (16,)
    np.testing.assert_allclose(out["priority"], td_error.abs().numpy(), rtol=1e-6)
    assert out["total_loss"] == pytest.approx(expected_loss.item(), rel=1e-6)
    assert out["q_value"] == pytest.approx(model(obs).mean().item(), rel=1e-5)
    assert out["cur_lr"] == pytest.approx(1e-3)
    assert policy.train_iter == 1


def test_learn_uses_value_gamma_column():
    policy = make_policy()
    value_gamma = np.full(16, 0.25, dtype=np.float32)
    batch = make_batch(2, value_gamma=value_gamma)
    model, target = copy.deepcopy(policy.model), copy.deepcopy(policy.target_model)
    out = policy.learn_mode.forward(batch)
    with torch.no_grad():
        next_obs = torch.as_tensor(batch["next_obs"])
        _, td_error = dqn_td_loss(
            model(torch.as_tensor(batch["obs"])), model(next_obs), target(next_obs),
            torch.as_tensor(batch["action"]), torch.as_tensor(batch["reward"]),
            torch.as_tensor(batch["terminated"]).float(), torch.as_tensor(value_gamma),
        )
    np.testing.assert_allclose(out["priority"], td_error.abs().numpy(), rtol=1e-6)


def test_nstep_without_value_gamma_is_an_error():
    cfg = load_config({"policy": {"nstep": 3, "model": {"obs_shape": 4, "action_shape": 2}}}).policy
    with pytest.raises(ValueError, match="value_gamma"):
        make_policy(cfg).learn_mode.forward(make_batch(0))


def test_zero_importance_weights_leave_the_network_unchanged():
    policy = make_policy()
    before = params(policy.model)
    out = policy.learn_mode.forward(make_batch(3, weight=np.zeros(16, dtype=np.float32)))
    assert out["total_loss"] == 0.0
    assert_same(before, params(policy.model))


def test_hard_target_update_every_freq_steps():
    policy = make_policy(policy_cfg(target_update_freq=3))
    initial = params(policy.target_model)
    for i in range(2):
        policy.learn_mode.forward(make_batch(i))
        assert_same(initial, params(policy.target_model))
    policy.learn_mode.forward(make_batch(2))
    assert_same(params(policy.model), params(policy.target_model))


def test_soft_target_update_every_step():
    policy = make_policy(policy_cfg(target_theta=0.25))
    old_target = params(policy.target_model)
    policy.learn_mode.forward(make_batch(0))
    expected = [0.75 * t + 0.25 * m for t, m in zip(old_target, params(policy.model), strict=True)]
    for got, want in zip(params(policy.target_model), expected, strict=True):
        torch.testing.assert_close(got, want)


def test_grad_clip_none_and_namespace_config():
    cfg = SimpleNamespace(
        discount_factor=0.9, nstep=1, cuda=False,
        model=SimpleNamespace(obs_shape=4, action_shape=2, encoder_hidden_size_list=[8], dueling=True),
        learn=SimpleNamespace(learning_rate=0.01, target_update_freq=5, target_theta=None, grad_clip=None,
                              double_q=False),
    )
    policy = make_policy(cfg)
    before = params(policy.model)
    out = policy.learn_mode.forward(make_batch(0))
    assert np.isfinite(out["total_loss"]) and out["cur_lr"] == pytest.approx(0.01)
    assert not all(torch.equal(a, b) for a, b in zip(before, params(policy.model), strict=True))


def test_missing_model_shapes_is_an_error():
    with pytest.raises(ValueError, match=r"cfg.model.obs_shape"):
        DQNPolicy(load_config({}).policy)


def test_state_dict_round_trip_continues_identically():
    cfg = policy_cfg(target_update_freq=3)
    policy = make_policy(cfg)
    for i in range(4):
        policy.learn_mode.forward(make_batch(i))
    policy.collect_mode.forward(make_batch(0)["obs"], eps=0.5)
    snapshot = copy.deepcopy(policy.state_dict())

    restored = make_policy(cfg, seed=123)
    restored.load_state_dict(snapshot)
    assert restored.train_iter == 4
    for i in range(4, 9):
        a = policy.learn_mode.forward(make_batch(i))
        b = restored.learn_mode.forward(make_batch(i))
        assert a["total_loss"] == b["total_loss"]
        np.testing.assert_array_equal(a["priority"], b["priority"])
    assert_same(params(policy.model), params(restored.model))
    assert_same(params(policy.target_model), params(restored.target_model))
    obs = make_batch(9, size=64)["obs"]
    np.testing.assert_array_equal(
        policy.collect_mode.forward(obs, eps=0.5), restored.collect_mode.forward(obs, eps=0.5)
    )


def test_eps_zero_is_greedy_and_eval_is_greedy():
    policy = make_policy()
    obs = make_batch(0, size=50)["obs"]
    greedy = policy.model(torch.as_tensor(obs)).argmax(dim=1).numpy()
    action = policy.collect_mode.forward(obs, eps=0.0)
    assert action.dtype == np.int64 and action.shape == (50,)
    np.testing.assert_array_equal(action, greedy)
    np.testing.assert_array_equal(policy.eval_mode.forward(obs), greedy)


def test_eps_one_is_uniform_and_seeded():
    policy = make_policy()
    obs = np.zeros((4000, 4), dtype=np.float32)  # one greedy action for every row
    policy.seed(7)
    first = policy.collect_mode.forward(obs, eps=1.0)
    assert abs(first.mean() - 0.5) < 0.04
    policy.seed(7)
    np.testing.assert_array_equal(first, policy.collect_mode.forward(obs, eps=1.0))


def test_acting_does_not_track_gradients_and_checks_shape():
    policy = make_policy()
    policy.collect_mode.forward(np.zeros((2, 4), dtype=np.float32), eps=0.3)
    assert all(p.grad is None for p in policy.model.parameters())
    with pytest.raises(ValueError, match=r"size 4, got shape \(3, 6\)"):
        policy.eval_mode.forward(np.zeros((3, 6), dtype=np.float32))


def test_eval_eps_is_seeded_and_draws_nothing_from_exploration():
    """``eval_mode.forward(obs, eps)`` (``policy.eval.eps``): uniform with eps 1, the same draws for the
    same seed, and from a stream of its own: exploration's actions are those of a policy that never evaluated."""
    obs = np.zeros((4000, 4), dtype=np.float32)  # one greedy action for every row
    policy, untouched = make_policy(), make_policy()
    first = policy.eval_mode.forward(obs, eps=1.0)
    assert abs(first.mean() - 0.5) < 0.04
    np.testing.assert_array_equal(first, make_policy().eval_mode.forward(obs, eps=1.0))
    assert not np.array_equal(first, make_policy().collect_mode.forward(obs, eps=1.0))  # not exploration's draws
    explored = policy.collect_mode.forward(obs, eps=0.5)
    np.testing.assert_array_equal(explored, untouched.collect_mode.forward(obs, eps=0.5))
    policy.seed(3)
    again = policy.eval_mode.forward(obs, eps=1.0)
    policy.seed(3)
    np.testing.assert_array_equal(again, policy.eval_mode.forward(obs, eps=1.0))


def test_eval_eps_zero_draws_nothing_and_the_state_dict_keeps_its_form():
    """eps 0 (the default) is the greedy action with no draw; the checkpointed state is exploration's alone."""
    policy, fresh = make_policy(), make_policy()
    obs = make_batch(0, size=50)["obs"]
    np.testing.assert_array_equal(policy.eval_mode.forward(obs, eps=0.0), policy.eval_mode.forward(obs))
    np.testing.assert_array_equal(policy.eval_mode.forward(obs, eps=1.0), fresh.eval_mode.forward(obs, eps=1.0))
    assert policy.state_dict()["rng"] == dict(np.random.default_rng(0).bit_generator.state)
