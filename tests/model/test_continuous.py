import math

import pytest
import torch
from torch import nn
from torch.distributions import Normal, TanhTransform, TransformedDistribution

from rlpipe.model import DeterministicActor, EnsembleLinear, EnsembleQ, SquashedGaussianActor
from rlpipe.model.continuous import LOG_STD_MAX, LOG_STD_MIN, squashed_gaussian_log_prob


def separate_stacks(ensemble: EnsembleQ) -> list[nn.Sequential]:
    """Member ``i`` of ``ensemble`` as an ordinary ``Linear -> ReLU -> ... -> Linear`` stack."""
    stacks = []
    for i in range(ensemble.n_critics):
        layers: list[nn.Module] = []
        for layer in ensemble.layers:
            linear = nn.Linear(layer.in_features, layer.out_features)
            with torch.no_grad():
                linear.weight.copy_(layer.weight[i].T)
                linear.bias.copy_(layer.bias[i, 0])
            layers += [linear, nn.ReLU()]
        stacks.append(nn.Sequential(*layers[:-1]))
    return stacks


# ---- EnsembleQ -----------------------------------------------------------------------
def test_ensemble_equals_separate_stacks_forward_and_backward():
    torch.manual_seed(0)
    ensemble = EnsembleQ(5, 2, hidden=(16, 8), n_critics=3)
    stacks = separate_stacks(ensemble)
    obs, action = torch.randn(7, 5), torch.rand(7, 2) * 2 - 1
    q = ensemble(obs, action)
    assert q.shape == (3, 7)
    expected = torch.stack([stack(torch.cat([obs, action], dim=1)).squeeze(-1) for stack in stacks])
    torch.testing.assert_close(q, expected)

    q.sum().backward()
    expected.sum().backward()
    for i, stack in enumerate(stacks):
        linears = [m for m in stack if isinstance(m, nn.Linear)]
        for layer, linear in zip(ensemble.layers, linears, strict=True):
            torch.testing.assert_close(layer.weight.grad[i].T, linear.weight.grad)
            torch.testing.assert_close(layer.bias.grad[i, 0], linear.bias.grad)


def test_under_bf16_autocast_hidden_layers_stay_bf16_and_q_values_float32():
    torch.manual_seed(0)
    ensemble = EnsembleQ(5, 2, hidden=(64, 64), n_critics=2)
    obs, action = torch.randn(32, 5), torch.rand(32, 2) * 2 - 1
    hidden_dtypes = []
    ensemble.layers[1].register_forward_hook(lambda module, inputs, output: hidden_dtypes.append(output.dtype))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        q = ensemble(obs, action)
        q.sum().backward()
    assert hidden_dtypes == [torch.bfloat16]  # the activations between the products
    assert q.dtype == torch.float32
    torch.testing.assert_close(q, ensemble(obs, action).detach(), rtol=0.02, atol=0.02)
    assert all(p.grad.dtype == torch.float32 for p in ensemble.parameters())


def test_members_selects_the_first_critics():
    torch.manual_seed(0)
    ensemble = EnsembleQ(4, 3, hidden=(8,), n_critics=2)
    obs, action = torch.randn(5, 4), torch.randn(5, 3)
    torch.testing.assert_close(ensemble(obs, action, members=1), ensemble(obs, action)[:1])


def test_members_are_initialised_like_nn_linear_and_independently():
    torch.manual_seed(0)
    layer = EnsembleLinear(64, 32, n=4)
    bound = 1.0 / math.sqrt(64)
    assert layer.weight.shape == (4, 64, 32) and layer.bias.shape == (4, 1, 32)
    assert layer.weight.abs().max() <= bound and layer.bias.abs().max() <= bound
    # uniform(-bound, bound) has std bound / sqrt(3), as nn.Linear's kaiming-uniform weights
    for member in layer.weight:
        assert member.std().item() == pytest.approx(bound / math.sqrt(3), rel=0.1)
    assert not torch.equal(layer.weight[0], layer.weight[1])


def test_shared_input_is_not_copied_per_member():
    layer = EnsembleLinear(3, 2, n=2)
    x = torch.randn(4, 3)
    torch.testing.assert_close(layer(x), layer(x.expand(2, 4, 3).contiguous()))


def test_batch_renorm_critics_normalise_each_members_hidden_layer_over_the_batch():
    torch.manual_seed(0)
    ensemble = EnsembleQ(4, 2, hidden=(16, 16), n_critics=2, batch_renorm=True)
    seen = []
    ensemble.layers[1].register_forward_hook(lambda module, inputs, output: seen.append(inputs[0]))
    obs, action = 10.0 + 3.0 * torch.randn(64, 4), torch.rand(64, 2) * 2 - 1
    q = ensemble(obs, action)
    assert q.shape == (2, 64)
    torch.testing.assert_close(seen[0].mean(dim=1), torch.zeros(2, 16), atol=1e-5, rtol=0)  # per member, per unit
    ensemble.eval()  # running statistics: one batch moved them 1% of the way, so eval differs from training
    assert not torch.allclose(ensemble(obs, action), q)
    with pytest.raises(ValueError, match="batch_renorm evaluates all its members"):
        ensemble(obs, action, members=1)


def test_ensemble_rejects_bad_sizes():
    with pytest.raises(ValueError, match="obs_shape and action_shape"):
        EnsembleQ(0, 2)
    with pytest.raises(ValueError, match="n_critics"):
        EnsembleQ(3, 2, n_critics=0)


# ---- SquashedGaussianActor -----------------------------------------------------------
def test_log_prob_matches_tanh_transformed_normal():
    torch.manual_seed(0)
    actor = SquashedGaussianActor(4, 3, hidden=(16,))
    obs = torch.randn(64, 4)
    generator = torch.Generator().manual_seed(5)
    action, log_pi = actor.sample(obs, generator)

    mean, log_std = actor(obs)
    eps = torch.randn(mean.shape, generator=torch.Generator().manual_seed(5))
    u = mean + log_std.exp() * eps
    reference = TransformedDistribution(Normal(mean, log_std.exp()), [TanhTransform(cache_size=1)])
    torch.testing.assert_close(action, torch.tanh(u))
    torch.testing.assert_close(log_pi, reference.log_prob(torch.tanh(u)).sum(-1), rtol=1e-4, atol=1e-4)


def test_log_prob_is_finite_and_exact_where_tanh_saturates():
    u = torch.tensor([[-30.0, -8.0, 0.0, 8.0, 30.0]])
    eps = torch.full_like(u, 0.3)
    log_std = torch.full_like(u, -1.0)
    log_pi = squashed_gaussian_log_prob(u, eps, log_std)
    u64 = u.double()
    # log(1 - tanh(u)^2) = log(sech(u)^2) = -2 * log(cosh(u)), exact in float64 via logaddexp
    log_det = 2.0 * (math.log(2.0) - torch.logaddexp(u64, -u64))
    expected = (-0.5 * 0.3**2 + 1.0 - 0.5 * math.log(2 * math.pi) - log_det).sum(-1)
    assert torch.isfinite(log_pi).all()
    torch.testing.assert_close(log_pi.double(), expected, rtol=1e-6, atol=1e-4)


def test_sample_is_reparameterised_and_bounded():
    torch.manual_seed(0)
    actor = SquashedGaussianActor(4, 2, hidden=(8, 8))
    action, log_pi = actor.sample(torch.randn(32, 4) * 10)
    assert action.shape == (32, 2) and log_pi.shape == (32,)
    assert action.abs().max() <= 1.0
    (action.sum() + log_pi.sum()).backward()
    assert all(p.grad is not None for p in actor.parameters())


def test_log_std_is_clamped_and_deterministic_is_tanh_mean():
    actor = SquashedGaussianActor(3, 2, hidden=(4,))
    with torch.no_grad():
        actor.log_std_head.bias.fill_(100.0)
        actor.log_std_head.weight.zero_()
    obs = torch.randn(5, 3)
    mean, log_std = actor(obs)
    assert torch.equal(log_std, torch.full_like(log_std, LOG_STD_MAX))
    with torch.no_grad():
        actor.log_std_head.bias.fill_(-100.0)
    assert torch.equal(actor(obs)[1], torch.full_like(log_std, LOG_STD_MIN))
    torch.testing.assert_close(actor.deterministic(obs), torch.tanh(mean))


# ---- DeterministicActor --------------------------------------------------------------
def test_deterministic_actor_is_bounded_and_checks_obs_size():
    torch.manual_seed(0)
    actor = DeterministicActor(4, 3, hidden=(8,))
    action = actor(torch.randn(6, 4) * 100)
    assert action.shape == (6, 3) and action.abs().max() <= 1.0
    with pytest.raises(ValueError, match=r"size 4, got shape \(2, 5\)"):
        actor(torch.zeros(2, 5))
    with pytest.raises(ValueError, match=r"size 3, got shape \(2, 5\)"):
        SquashedGaussianActor(3, 1)(torch.zeros(2, 5))
