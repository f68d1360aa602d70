"""DQN's Q-network: the distributional head with one output per action, the dueling combination,
and the parameter names and draws of the checkpoints written before it was."""
import pytest
import torch
from torch import nn

from rlpipe.model import DQN, DistributionalQ
from rlpipe.model.encoders import EncoderConfig, make_encoder, observation_space


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


@pytest.mark.parametrize("dueling", [False, True])
def test_it_is_the_distributional_head_with_one_output(dueling):
    torch.manual_seed(0)
    dqn = DQN(4, 3, encoder_hidden_size_list=(16, 8), dueling=dueling)
    torch.manual_seed(0)
    head = DistributionalQ(4, 3, 1, encoder_hidden_size_list=(16, 8), dueling=dueling)
    assert list(dqn.state_dict()) == list(head.state_dict())
    assert all(torch.equal(a, b) for a, b in zip(dqn.state_dict().values(), head.state_dict().values(), strict=True))
    obs = torch.randn(5, 4)
    assert torch.equal(dqn(obs), head(obs)[..., 0])


def former_dqn_state(dueling, seed=0):
    """The state dict the Q-network had before it was the one-output head: its encoder, then ``head``
    (or ``value_head`` and ``advantage_head``), drawn in that order from torch's generator."""
    torch.manual_seed(seed)
    encoder, n_features = make_encoder(observation_space(4), EncoderConfig((16, 8), "auto"))
    heads = {"value_head": nn.Linear(n_features, 1), "advantage_head": nn.Linear(n_features, 3)} if dueling else {
        "head": nn.Linear(n_features, 3)}
    state = {f"encoder.{k}": v for k, v in encoder.state_dict().items()}
    for name, layer in heads.items():
        state.update({f"{name}.{k}": v for k, v in layer.state_dict().items()})
    return state, encoder, heads


@pytest.mark.parametrize("dueling", [False, True])
def test_a_former_checkpoint_loads_unchanged_and_gives_its_values(dueling):
    state, encoder, heads = former_dqn_state(dueling)
    torch.manual_seed(0)
    fresh = DQN(4, 3, encoder_hidden_size_list=(16, 8), dueling=dueling)
    assert sorted(fresh.state_dict()) == sorted(state)
    assert all(torch.equal(fresh.state_dict()[k], v) for k, v in state.items())  # the same draws, in order
    model = DQN(4, 3, encoder_hidden_size_list=(16, 8), dueling=dueling)
    model.load_state_dict(state)
    obs = torch.randn(6, 4)
    h = encoder(obs)
    if dueling:
        adv = heads["advantage_head"](h)
        expected = heads["value_head"](h) + adv - adv.mean(dim=-1, keepdim=True)
    else:
        expected = heads["head"](h)
    assert torch.equal(model(obs), expected)
