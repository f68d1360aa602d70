"""QR-DQN's quantile Huber loss against hand computations, its fixed point (the quantiles), and
the policy's bootstrapped n-step target."""
import numpy as np
import pytest
import torch

from rlpipe.policy import QRDQNPolicy, quantile_huber_loss

from .test_c51 import N_STEP_GAMMAS, batch, bootstrap_outputs, c51_cfg

# N = 2 quantiles at tau = [0.25, 0.75], theta = [0, 1]; M = 2 target samples [0.5, 3].
# u_ij = target_j - theta_i: row 0 = [0.5, 3], row 1 = [-0.5, 2]; |tau_i - 1{u_ij < 0}|:
# row 0 = [0.25, 0.25], row 1 = [0.25, 0.75].
THETA = [[0.0, 1.0]]
TARGET = [[0.5, 3.0]]


@pytest.mark.parametrize(("kappa", "expected"), [
    # L_1 / 1: [[0.125, 2.5], [0.125, 1.5]]: (0.25 * 0.125 + 0.25 * 2.5) / 2 + (0.25 * 0.125 + 0.75 * 1.5) / 2
    (1.0, 0.328125 + 0.578125),
    # L_2 / 2: [[0.0625, 2.0], [0.0625, 1.0]]
    (2.0, (0.25 * 0.0625 + 0.25 * 2.0) / 2 + (0.25 * 0.0625 + 0.75 * 1.0) / 2),
    # kappa 0, |u|: [[0.5, 3], [0.5, 2]]
    (0.0, (0.25 * 0.5 + 0.25 * 3.0) / 2 + (0.25 * 0.5 + 0.75 * 2.0) / 2),
])
def test_quantile_huber_loss_by_hand(kappa, expected):
    loss, per_sample = quantile_huber_loss(torch.tensor(THETA), torch.tensor(TARGET), kappa)
    assert per_sample.tolist() == pytest.approx([expected])
    assert loss.item() == pytest.approx(expected)


def test_importance_weights_scale_each_sample():
    theta = torch.tensor([THETA[0], THETA[0]])
    target = torch.tensor([TARGET[0], TARGET[0]])
    loss, per_sample = quantile_huber_loss(theta, target, 1.0, weight=torch.tensor([0.0, 2.0]))
    assert loss.item() == pytest.approx(per_sample[1].item())


def test_a_negative_kappa_is_refused():
    with pytest.raises(ValueError, match="kappa"):
        quantile_huber_loss(torch.tensor(THETA), torch.tensor(TARGET), -1.0)


def test_minimising_the_loss_finds_the_quantiles_of_the_targets():
    samples = torch.arange(100.0).unsqueeze(0)  # uniform on 0..99: the tau quantile is about 100 tau
    theta = torch.zeros(1, 4, requires_grad=True)
    optimizer = torch.optim.Adam([theta], lr=0.5)
    for _ in range(1500):
        optimizer.zero_grad()
        quantile_huber_loss(theta, samples, kappa=0.0)[0].backward()
        optimizer.step()
    torch.testing.assert_close(theta.detach(), torch.tensor([[12.5, 37.5, 62.5, 87.5]]), atol=1.0, rtol=0)


def qr_cfg(nstep=1, double_q=True):
    cfg = c51_cfg(nstep=nstep, double_q=double_q, num_quantiles=4)
    cfg.learn.kappa = 1.0
    return cfg


@pytest.mark.parametrize("double_q", [True, False])
def test_the_policy_regresses_on_the_bootstrapped_n_step_quantiles(double_q):
    torch.manual_seed(0)
    policy = QRDQNPolicy(qr_cfg(nstep=3, double_q=double_q))
    b = batch(value_gamma=N_STEP_GAMMAS)
    t = {k: torch.as_tensor(v) for k, v in b.items()}
    next_theta = bootstrap_outputs(policy, t["next_obs"], double_q, lambda theta: theta.mean(dim=-1))
    with torch.no_grad():
        target = t["reward"][:, None] + (t["value_gamma"] * (1 - t["terminated"]))[:, None] * next_theta
        theta = policy.model(t["obs"])[torch.arange(6), t["action"]]
        expected, per_sample = quantile_huber_loss(theta, target, 1.0)
    out = policy.learn_mode.forward(b)
    assert out["total_loss"] == pytest.approx(expected.item(), rel=1e-6)
    np.testing.assert_allclose(out["priority"], per_sample.numpy(), rtol=1e-6)
