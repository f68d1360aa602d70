"""C51's pure parts against hand computations: the projection (inside and beyond the support,
terminal transitions, n-step discounts) and the cross-entropy loss; the policy wires them."""
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from rlpipe.policy import C51Policy, c51_loss, categorical_projection

SUPPORT = torch.tensor([0.0, 1.0, 2.0, 3.0, 4.0])
P = torch.tensor([0.1, 0.2, 0.3, 0.2, 0.2])


def project(reward, terminated=0.0, value_gamma=0.5, probs=P):
    return categorical_projection(probs.unsqueeze(0), torch.tensor([reward]), torch.tensor([terminated]),
                                  value_gamma, SUPPORT)[0]


def test_shifted_atoms_split_their_mass_between_neighbours():
    # Tz = 1 + 0.5 z = [1, 1.5, 2, 2.5, 3]: 1.5 and 2.5 split half and half
    torch.testing.assert_close(project(1.0), torch.tensor([0.0, 0.1 + 0.1, 0.1 + 0.3 + 0.1, 0.1 + 0.2, 0.0]))


def test_atoms_beyond_the_support_land_on_its_ends():
    # Tz = 3 + z = [3, 4, 5, 6, 7] -> clipped to [3, 4, 4, 4, 4]
    torch.testing.assert_close(project(3.0, value_gamma=1.0), torch.tensor([0.0, 0.0, 0.0, 0.1, 0.9]))
    # Tz = -2 + z = [-2, -1, 0, 1, 2] -> clipped to [0, 0, 0, 1, 2]
    torch.testing.assert_close(project(-2.0, value_gamma=1.0), torch.tensor([0.6, 0.2, 0.2, 0.0, 0.0]))


def test_a_terminal_transition_projects_to_the_reward_only():
    # every atom goes to r = 2.25: 0.75 on atom 2, 0.25 on atom 3, whatever Z' was
    torch.testing.assert_close(project(2.25, terminated=1.0), torch.tensor([0.0, 0.0, 0.75, 0.25, 0.0]))
    torch.testing.assert_close(project(10.0, terminated=1.0), torch.tensor([0.0, 0.0, 0.0, 0.0, 1.0]))


def test_n_step_targets_use_each_samples_value_gamma():
    # 3-step returns with gamma 0.5: r = 1 + 0.5 + 0.25 = 1.75, value_gamma = 0.125; Z' = 4 surely:
    # Tz = 1.75 + 0.5 = 2.25. The second sample is a 1-step return cut by termination (no bootstrap).
    one_hot = torch.tensor([[0.0, 0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0, 1.0]])
    target = categorical_projection(one_hot, torch.tensor([1.75, 1.0]), torch.tensor([0.0, 1.0]),
                                    torch.tensor([0.125, 0.5]), SUPPORT)
    torch.testing.assert_close(target, torch.tensor([[0.0, 0.0, 0.75, 0.25, 0.0], [0.0, 1.0, 0.0, 0.0, 0.0]]))


def test_projection_keeps_probability_mass():
    rng = torch.Generator().manual_seed(0)
    probs = torch.softmax(torch.randn(64, 5, generator=rng), dim=-1)
    target = categorical_projection(probs, 6 * torch.randn(64, generator=rng), (torch.rand(64, generator=rng) < 0.3)
                                    .float(), 0.9, SUPPORT)
    torch.testing.assert_close(target.sum(dim=-1), torch.ones(64))
    assert (target >= 0).all()


def test_cross_entropy_loss_and_its_per_sample_values():
    logits = torch.zeros(2, 3, 5, requires_grad=True)  # uniform distributions: log p = -log 5
    logits.data[1, 2] = torch.tensor([0.0, 0.0, math.log(3.0), 0.0, 0.0])  # p = [1, 1, 3, 1, 1] / 7
    target = torch.tensor([[0.0, 0.5, 0.5, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0, 0.0]])
    loss, per_sample = c51_loss(logits, torch.tensor([0, 2]), target, weight=torch.tensor([1.0, 3.0]))
    expected = torch.tensor([math.log(5.0), -math.log(3.0 / 7.0)])
    torch.testing.assert_close(per_sample, expected)
    assert loss.item() == pytest.approx((expected[0] + 3 * expected[1]).item() / 2)
    loss.backward()
    assert logits.grad is not None and logits.grad[0, 1].abs().sum() == 0  # untaken actions get no gradient


def c51_cfg(nstep=1, double_q=True, **model):
    return SimpleNamespace(
        discount_factor=0.5, nstep=nstep, cuda=False,
        model=SimpleNamespace(**{"obs_shape": 3, "action_shape": 2, "encoder_hidden_size_list": [8],
                                 "dueling": False, "num_atoms": 5, "v_min": 0.0, "v_max": 4.0, **model}),
        learn=SimpleNamespace(learning_rate=0.01, target_update_freq=100, target_theta=None, grad_clip=None,
                              double_q=double_q),
    )


def batch(value_gamma=None, size=6):
    rng = np.random.default_rng(1)
    out = {
        "obs": rng.normal(size=(size, 3)).astype(np.float32),
        "action": rng.integers(2, size=size),
        "reward": rng.normal(size=size).astype(np.float32),
        "next_obs": rng.normal(size=(size, 3)).astype(np.float32),
        "terminated": np.array([0, 1, 0, 0, 1, 0], dtype=np.float32)[:size],
    }
    if value_gamma is not None:
        out["value_gamma"] = value_gamma
    return out


N_STEP_GAMMAS = np.array([0.125, 0.5, 0.25, 0.125, 0.125, 0.5], dtype=np.float32)
"""``value_gamma`` of a 3-step :func:`batch`: gamma 0.5, episodes cut short at different steps."""


def bootstrap_outputs(policy, next_obs: torch.Tensor, double_q: bool, q_of) -> torch.Tensor:
    """By hand: the target network's outputs ``[B, N]`` at the bootstrap action of ``next_obs``, the
    greedy action by ``q_of(outputs)`` of the online network (double Q) or of the target network."""
    with torch.no_grad():
        chooser = policy.model if double_q else policy.target_model
        next_action = q_of(chooser(next_obs)).argmax(dim=1)
        return policy.target_model(next_obs)[torch.arange(len(next_obs)), next_action]


@pytest.mark.parametrize("double_q", [True, False])
def test_the_policy_learns_on_the_projected_n_step_target(double_q):
    torch.manual_seed(0)
    policy = C51Policy(c51_cfg(nstep=3, double_q=double_q))
    b = batch(value_gamma=N_STEP_GAMMAS)
    t = {k: torch.as_tensor(v) for k, v in b.items()}
    next_probs = torch.softmax(bootstrap_outputs(policy, t["next_obs"], double_q, policy.q_values), dim=-1)
    with torch.no_grad():
        target = categorical_projection(next_probs, t["reward"], t["terminated"], t["value_gamma"], policy.support)
        expected, per_sample = c51_loss(policy.model(t["obs"]), t["action"], target)
    out = policy.learn_mode.forward(b)
    assert out["total_loss"] == pytest.approx(expected.item(), rel=1e-6)
    np.testing.assert_allclose(out["priority"], per_sample.numpy(), rtol=1e-6)


def test_an_n_step_policy_refuses_a_batch_without_value_gamma():
    policy = C51Policy(c51_cfg(nstep=3))
    with pytest.raises(ValueError, match="value_gamma"):
        policy.learn_mode.forward(batch())


def test_q_values_are_the_distributions_means():
    policy = C51Policy(c51_cfg())
    logits = torch.full((1, 2, 5), -1e9)
    logits[0, 0, 4] = 0.0  # action 0: surely 4
    logits[0, 1] = 0.0  # action 1: uniform on [0, 4], mean 2
    torch.testing.assert_close(policy.q_values(logits), torch.tensor([[4.0, 2.0]]))
    assert policy.eval_mode.forward(np.zeros((4, 3), dtype=np.float32)).shape == (4,)


def test_a_bad_support_is_refused():
    with pytest.raises(ValueError, match="v_min < v_max"):
        C51Policy(c51_cfg(v_min=1.0, v_max=1.0))
