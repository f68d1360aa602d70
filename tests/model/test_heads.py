"""DistributionalQ: N outputs per action, the dueling split per output, and noisy head layers."""
import torch

from rlpipe.model import DistributionalQ, NoisyLinear


def test_plain_head_shape():
    torch.manual_seed(0)
    net = DistributionalQ(4, 3, 7, encoder_hidden_size_list=[8])
    assert net(torch.zeros(5, 4)).shape == (5, 3, 7)
    assert not any(isinstance(m, NoisyLinear) for m in net.modules())


def test_dueling_head_centres_advantages_per_output():
    torch.manual_seed(0)
    net = DistributionalQ(4, 3, 7, encoder_hidden_size_list=[8], dueling=True)
    obs = torch.randn(5, 4)
    out = net(obs)
    value = net.value_head(net.encoder(obs))
    # v + adv - mean_a(adv): the mean over actions of every output is the value stream's
    torch.testing.assert_close(out.mean(dim=1), value)


def test_noisy_head_layers_and_deterministic_encoder():
    torch.manual_seed(0)
    net = DistributionalQ(4, 2, 5, encoder_hidden_size_list=[8], dueling=True, noisy=True, sigma0=0.3)
    noisy = [m for m in net.modules() if isinstance(m, NoisyLinear)]
    assert len(noisy) == 2
    assert not any(isinstance(m, NoisyLinear) for m in net.encoder.modules())
    torch.testing.assert_close(noisy[0].bias_sigma, torch.full((5,), 0.3 / 8**0.5))
