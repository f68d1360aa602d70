import pytest
import torch
from torch import nn

from rlpipe.model import DQN


def test_forward_shape_and_encoder_layers():
    torch.manual_seed(0)
    model = DQN(4, 3, encoder_hidden_size_list=(16, 8))
    q = model(torch.randn(5, 4))
    assert q.shape == (5, 3)
    linears = [m for m in model.encoder if isinstance(m, nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linears] == [(4, 16), (16, 8)]
    assert model.head.in_features == 8


def test_without_hidden_layers_is_linear():
    model = DQN(4, 2, encoder_hidden_size_list=())
    obs = torch.randn(3, 4)
    torch.testing.assert_close(model(obs), obs @ model.head.weight.T + model.head.bias)


def test_dueling_head_combines_value_and_centred_advantage():
    torch.manual_seed(0)
    model = DQN(4, 3, dueling=True)
    obs = torch.randn(6, 4)
    q = model(obs)
    h = model.encoder(obs)
    v = model.value_head(h)
    adv = model.advantage_head(h)
    torch.testing.assert_close(q.mean(dim=1, keepdim=True), v)
    torch.testing.assert_close(q - v, adv - adv.mean(dim=1, keepdim=True))


@pytest.mark.parametrize("dueling", [False, True])
def test_gradients_reach_every_parameter(dueling):
    torch.manual_seed(0)
    model = DQN(4, 3, dueling=dueling)
    q = model(torch.randn(8, 4))
    # a loss on one action's value, as the TD loss is: the sum over actions would give the dueling
    # advantage head no gradient at all (q sums to 3 v there, whatever the advantages)
    q[:, 0].sum().backward()
    for name, parameter in model.named_parameters():
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0, name


def test_wrong_observation_size_names_both_shapes():
    model = DQN(4, 2)
    with pytest.raises(ValueError, match=r"model expects observations of size 4, got shape \(7, 6\)"):
        model(torch.zeros(7, 6))


def test_non_positive_sizes_rejected():
    with pytest.raises(ValueError, match="obs_shape and action_shape"):
        DQN(0, 2)
