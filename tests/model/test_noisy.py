"""NoisyLinear: its initialisation, the statistics and factorised structure of its noise, when
the noise changes, and its noise-free eval mode."""
import math

import numpy as np
import pytest
import torch
from gymnasium import spaces
from torch import nn

from rlpipe.model import DistributionalQ, noisy
from rlpipe.model.noisy import NoisyLinear, has_noise, reset_noise


def test_initialisation_follows_the_paper():
    torch.manual_seed(0)
    layer = NoisyLinear(16, 3, sigma0=0.5)
    assert layer.weight_mu.abs().max() <= 1 / math.sqrt(16)
    torch.testing.assert_close(layer.weight_sigma, torch.full((3, 16), 0.5 / 4))
    torch.testing.assert_close(layer.bias_sigma, torch.full((3,), 0.5 / 4))


def test_noise_has_mean_zero_and_the_factorised_variances():
    # f(x) = sign(x) sqrt(|x|) of a standard normal has E f = 0 and E f^2 = E|x| = sqrt(2 / pi);
    # a weight's noise f(a) f(b) then has variance 2 / pi
    layer = NoisyLinear(4, 3)
    generator = torch.Generator().manual_seed(0)
    weights, biases = [], []
    for _ in range(4000):
        layer.reset_noise(generator)
        eps_w, eps_b = layer.noise()
        weights.append(eps_w.clone())
        biases.append(eps_b.clone())
    w, b = torch.stack(weights), torch.stack(biases)
    assert w.mean(dim=0).abs().max() < 0.05 and b.mean(dim=0).abs().max() < 0.05
    torch.testing.assert_close(w.var(dim=0), torch.full((3, 4), 2 / math.pi), atol=0.05, rtol=0)
    torch.testing.assert_close(b.var(dim=0), torch.full((3,), math.sqrt(2 / math.pi)), atol=0.05, rtol=0)


def test_weight_noise_is_the_outer_product_of_output_and_input_noise():
    layer = NoisyLinear(5, 4)
    layer.reset_noise(torch.Generator().manual_seed(3))
    eps_w, eps_b = layer.noise()
    torch.testing.assert_close(eps_w, torch.outer(eps_b, layer.eps_in))
    assert torch.linalg.matrix_rank(eps_w) == 1


def test_training_output_uses_the_noise_until_the_next_draw():
    torch.manual_seed(0)
    layer = NoisyLinear(5, 4)
    x = torch.randn(7, 5)
    generator = torch.Generator().manual_seed(1)
    layer.reset_noise(generator)
    eps_w, eps_b = layer.noise()
    expected = x @ (layer.weight_mu + layer.weight_sigma * eps_w).T + layer.bias_mu + layer.bias_sigma * eps_b
    torch.testing.assert_close(layer(x), expected)
    torch.testing.assert_close(layer(x), expected)  # same noise until reset_noise
    layer.reset_noise(generator)
    assert not torch.allclose(layer(x), expected)


def test_eval_mode_is_the_deterministic_mean_layer():
    torch.manual_seed(0)
    layer = NoisyLinear(5, 4)
    x = torch.randn(7, 5)
    layer.eval()
    generator = torch.Generator().manual_seed(1)
    outputs = []
    for _ in range(3):
        layer.reset_noise(generator)
        outputs.append(layer(x))
    mean = x @ layer.weight_mu.T + layer.bias_mu
    for out in outputs:
        torch.testing.assert_close(out, mean)


def test_noise_stays_out_of_the_state_dict_and_a_seeded_draw_repeats():
    layer = NoisyLinear(3, 2)
    assert set(layer.state_dict()) == {"weight_mu", "bias_mu", "weight_sigma", "bias_sigma"}
    model = torch.nn.Sequential(NoisyLinear(3, 2), torch.nn.ReLU(), NoisyLinear(2, 2))
    assert has_noise(model) and not has_noise(torch.nn.Linear(2, 2))
    reset_noise(model, torch.Generator().manual_seed(5))
    first = [m.eps_in.clone() for m in model if isinstance(m, NoisyLinear)]
    reset_noise(model, torch.Generator().manual_seed(5))
    assert all(torch.equal(a, m.eps_in) for a, m in zip(first, [m for m in model if isinstance(m, NoisyLinear)],
                                                         strict=True))


def test_a_negative_sigma0_is_refused():
    with pytest.raises(ValueError, match="noisy_sigma0"):
        NoisyLinear(3, 2, sigma0=-0.1)


def test_a_noisy_encoder_makes_the_nature_cnns_512_unit_layer_noisy_as_rainbow_does():
    """``noisy_encoder``: every fully connected layer after the convolutions is noisy (the encoder's
    512-unit layer and both dueling heads); the convolutions stay deterministic, eval mode is the
    means' network, and the encoder alone without noisy heads is refused."""
    atari = spaces.Box(0, 255, (4, 84, 84), np.uint8)
    torch.manual_seed(0)
    net = DistributionalQ(atari, 6, 51, dueling=True, noisy=True, sigma0=0.1, noisy_encoder=True)
    noisy = [m for m in net.modules() if isinstance(m, NoisyLinear)]
    assert [(m.in_features, m.out_features) for m in noisy] == [(3136, 512), (512, 51), (512, 306)]
    assert not any(isinstance(m, nn.Linear) for m in net.modules())
    assert noisy[0].weight_sigma[0, 0].item() == pytest.approx(0.1 / math.sqrt(3136))

    obs = torch.randint(0, 256, (2, *atari.shape), dtype=torch.uint8)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        reset_noise(net, generator)
        first = net(obs)
        reset_noise(net, generator)
        assert not torch.allclose(net(obs), first)
        net.eval()
        means = net(obs)
        reset_noise(net, generator)
        torch.testing.assert_close(net(obs), means, rtol=0, atol=0)
    head_only = DistributionalQ(atari, 6, 51, dueling=True, noisy=True)
    assert sum(isinstance(m, NoisyLinear) for m in head_only.modules()) == 2
    with pytest.raises(ValueError, match=r"noisy_encoder\) needs noisy layers"):
        DistributionalQ(atari, 6, 51, noisy_encoder=True)


@pytest.mark.parametrize("rows", [1, 7])
def test_small_batches_factored_path_gives_the_weight_matrix_paths_values_and_gradients(rows, monkeypatch):
    def values_and_gradients(max_rows):
        monkeypatch.setattr(noisy, "FACTORED_MAX_ROWS", max_rows)
        torch.manual_seed(0)
        layer = NoisyLinear(6, 4, sigma0=0.5)
        layer.reset_noise(torch.Generator().manual_seed(2))
        x = torch.randn(rows, 6, requires_grad=True)
        out = layer(x)
        out.pow(2).sum().backward()
        return [out, x.grad, *(p.grad for p in layer.parameters())]

    factored, weight_matrix = values_and_gradients(64), values_and_gradients(0)
    for a, b in zip(factored, weight_matrix, strict=True):
        torch.testing.assert_close(a, b)


def test_under_bfloat16_autocast_both_paths_give_the_same_values_to_bfloat16_precision(monkeypatch):
    def output(max_rows):
        monkeypatch.setattr(noisy, "FACTORED_MAX_ROWS", max_rows)
        torch.manual_seed(0)
        layer = NoisyLinear(64, 16, sigma0=0.5)
        layer.reset_noise(torch.Generator().manual_seed(2))
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return layer(torch.randn(4, 64)).float()

    torch.testing.assert_close(output(64), output(0), rtol=2e-2, atol=2e-2)
