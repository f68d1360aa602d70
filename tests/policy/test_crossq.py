import copy

import numpy as np
import pytest
import torch

from rlpipe.policy import CrossQPolicy, Policy
from rlpipe.policy.sac import sac_critic_loss, sac_td_target

from .test_sac import ACT, OBS, assert_same, make_batch, one_step_bandit_batches, params, sac_cfg


def crossq_cfg(**learn):
    cfg = sac_cfg(**{"actor_update_freq": 3, **learn})
    del cfg.learn.target_theta  # CrossQ reads no target settings
    return cfg


def make_policy(cfg=None, seed=0):
    torch.manual_seed(seed)
    return CrossQPolicy(cfg if cfg is not None else crossq_cfg(), seed=seed)


def changed(before, after):
    return any(not torch.equal(a, b) for a, b in zip(before, after, strict=True))


def test_has_no_target_networks_and_acts_in_eval_mode():
    policy = make_policy()
    assert isinstance(policy, Policy)
    assert not hasattr(policy, "target_critic")
    assert set(policy.state_dict()) == {"actor", "critic", "actor_optimizer", "critic_optimizer", "log_alpha",
                                        "train_iter", "rng"}
    assert not policy.actor.training and not policy.critic.training
    actor_state = copy.deepcopy(policy.actor.state_dict())
    obs = make_batch(0)["obs"]
    action = policy.collect_mode.forward(obs)
    assert action.shape == (16, ACT) and np.all(np.abs(action) <= 1)
    policy.eval_mode.forward(obs)
    for name, value in policy.actor.state_dict().items():  # acting moved no running statistics
        assert torch.equal(value, actor_state[name]), name


def test_critic_step_is_one_joint_pass_over_current_and_next_rows():
    policy = make_policy()
    batch = make_batch(1)
    twin = copy.deepcopy(policy)
    t = {k: torch.as_tensor(v, dtype=torch.float32) for k, v in batch.items()}
    alpha = twin.log_alpha.detach().exp()
    with torch.no_grad():
        next_action, next_log_pi = twin.actor.sample(t["next_obs"], twin._rng.learn)
    twin.critic.train()
    q_joint = twin.critic(torch.cat([t["obs"], t["next_obs"]]), torch.cat([t["action"], next_action]))
    q, next_q = q_joint[:, :16], q_joint[:, 16:]
    td_target = sac_td_target(t["reward"], t["terminated"], 0.9, next_q.detach(), next_log_pi, alpha)
    loss, td_error = sac_critic_loss(q, td_target)

    out = policy.learn_mode.forward(batch)
    assert out["critic_loss"] == pytest.approx(loss.item(), rel=1e-6)
    np.testing.assert_allclose(out["priority"], td_error.abs().mean(0).numpy(), rtol=1e-6)
    # the input statistics of every critic cover both halves: 0.99 * 0 + 0.01 * mean(obs | next_obs)
    joint_obs_mean = torch.cat([t["obs"], t["next_obs"]]).mean(0)
    for member in range(2):
        torch.testing.assert_close(policy.critic.norms[0].running_mean[member, 0, :OBS], 0.01 * joint_obs_mean)
    assert not policy.critic.training


def test_actor_and_temperature_step_every_actor_update_freq_calls():
    policy = make_policy()
    for call in range(1, 7):
        actor_before, critic_before, alpha_before = params(policy.actor), params(policy.critic), policy.alpha
        out = policy.learn_mode.forward(make_batch(call))
        stepped = call % 3 == 0
        assert ("actor_loss" in out) == stepped and ("entropy" in out) == stepped and ("alpha_loss" in out) == stepped
        assert changed(actor_before, params(policy.actor)) == stepped
        assert (policy.alpha != alpha_before) == stepped
        assert changed(critic_before, params(policy.critic))
        if stepped:
            assert out["total_loss"] == pytest.approx(out["critic_loss"] + out["actor_loss"])
    assert policy.train_iter == 6
    assert int(policy.actor.trunk[0].steps) == 2  # the actor's statistics moved on its two steps only


def test_state_dict_round_trip_continues_identically():
    policy = make_policy()
    for i in range(4):
        policy.learn_mode.forward(make_batch(i))
    snapshot = copy.deepcopy(policy.state_dict())
    restored = make_policy(seed=123)
    restored.load_state_dict(snapshot)
    obs = make_batch(9, size=32)["obs"]
    np.testing.assert_array_equal(policy.eval_mode.forward(obs), restored.eval_mode.forward(obs))
    for i in range(4, 8):
        a, b = policy.learn_mode.forward(make_batch(i)), restored.learn_mode.forward(make_batch(i))
        assert a["total_loss"] == b["total_loss"]
    for name in ("actor", "critic"):
        assert_same(params(getattr(policy, name)), params(getattr(restored, name)))
        for key, value in getattr(policy, name).state_dict().items():
            assert torch.equal(value, getattr(restored, name).state_dict()[key]), key


def test_adam_betas_reach_both_optimizers():
    policy = make_policy(crossq_cfg(adam_betas=[0.5, 0.999]))
    for optimizer in (policy.actor_optimizer, policy.critic_optimizer):
        assert optimizer.param_groups[0]["betas"] == (0.5, 0.999)
    with pytest.raises(ValueError, match=r"cfg.learn.adam_betas must be two numbers in \[0, 1\)"):
        make_policy(crossq_cfg(adam_betas=[0.5, 1.0]))
    with pytest.raises(ValueError, match="actor_update_freq must be positive"):
        make_policy(crossq_cfg(actor_update_freq=0))


def test_accepts_torch_tensors():
    policy = make_policy()
    batch = {k: torch.as_tensor(v) for k, v in make_batch(0).items()}  # the seed's data: dicts of tensors
    for _ in range(3):
        out = policy.learn_mode.forward(batch)
    assert np.isfinite(out["total_loss"]) and "actor_loss" in out


def test_learns_the_best_action_of_a_one_step_reward():
    # SAC's bandit, with observations that vary (one repeated state has no spread to normalise)
    # and carry no information: the actor must learn to ignore them. Over seeds 0-7 the mean
    # action of 64 states was within 0.063 of 0.5, every one within 0.23.
    cfg = crossq_cfg(hidden=(64, 64), learning_rate_actor=1e-3, learning_rate_q=1e-3, auto_alpha=False, alpha=0.01,
                     actor_update_freq=1, adam_betas=[0.5, 0.999])
    cfg.model.action_shape = 1
    policy = make_policy(cfg)
    rng = np.random.default_rng(0)
    for batch in one_step_bandit_batches(600):
        batch["obs"] = batch["next_obs"] = rng.normal(size=batch["obs"].shape).astype(np.float32)
        policy.learn_mode.forward(batch)
    action = policy.eval_mode.forward(rng.normal(size=(64, OBS)).astype(np.float32))
    assert abs(action.mean() - 0.5) < 0.1
    np.testing.assert_allclose(action, 0.5, atol=0.35)


def test_acting_state_carries_the_running_statistics_a_remote_collector_acts_with():
    policy = make_policy()
    for i in range(6):
        policy.learn_mode.forward(make_batch(i))
    collector = make_policy(seed=7)  # a remote collector's copy: other weights, fresh statistics
    collector.load_acting_state_dict(copy.deepcopy(policy.acting_state_dict()))
    obs = make_batch(9, size=32)["obs"]
    np.testing.assert_array_equal(collector.eval_mode.forward(obs), policy.eval_mode.forward(obs))
    assert "critic" not in policy.acting_state_dict()
