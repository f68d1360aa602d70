"""The recurrent Q-network: a sequence unrolled at once equals the same sequence stepped, for both
cores, both heads and several observation spaces; the state layout; the core carries information."""
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from gymnasium import spaces

from rlpipe.model import DQN, RecurrentQ
from rlpipe.model.encoders import EncoderConfig

BOX = spaces.Box(-1.0, 1.0, (5,), np.float32)
SPACES = {
    "box": BOX,
    "discrete": spaces.Discrete(6),
    "multidiscrete": spaces.MultiDiscrete([3, 4]),
    "image": spaces.Box(0, 1, (2, 10, 10), np.uint8),
    "dict": spaces.Dict({"a": BOX, "b": spaces.Discrete(3)}),
}


def sample_obs(space, batch, steps, seed=0):
    """``[batch, steps, *shape]`` observations of ``space`` (a dict of them for a ``Dict``)."""
    if isinstance(space, spaces.Dict):
        return {key: sample_obs(sub, batch, steps, seed + i) for i, (key, sub) in enumerate(space.spaces.items())}
    space.seed(seed)
    return torch.as_tensor(np.stack([np.stack([space.sample() for _ in range(steps)]) for _ in range(batch)]))


def at(obs, t):
    return {key: value[:, t] for key, value in obs.items()} if isinstance(obs, dict) else obs[:, t]


def make(space=BOX, core="gru", dueling=False, hidden=8):
    torch.manual_seed(0)
    return RecurrentQ(space, 3, EncoderConfig([16]), core=core, core_hidden=hidden, dueling=dueling)


@pytest.mark.parametrize("space", SPACES)
@pytest.mark.parametrize("dueling", [False, True])
@pytest.mark.parametrize("core", ["gru", "lstm"])
def test_forward_over_a_sequence_equals_stepping_it(core, dueling, space):
    model = make(SPACES[space], core, dueling)
    obs = sample_obs(SPACES[space], batch=4, steps=6)
    start = torch.randn(4, model.state_size)  # a stored state, not zeros
    q, states = model(obs, start)
    assert q.shape == (4, 6, 3) and states.shape == (4, 6, model.state_size)
    assert q.dtype == states.dtype == torch.float32
    state = start
    for t in range(6):
        q_t, state = model.step(at(obs, t), state)
        torch.testing.assert_close(q[:, t], q_t)
        torch.testing.assert_close(states[:, t], state)  # the state AFTER step t


def test_state_is_one_vector_per_env_zero_at_the_start():
    gru, lstm = make(core="gru", hidden=8), make(core="lstm", hidden=8)
    assert gru.state_size == 8 and lstm.state_size == 16
    for model in (gru, lstm):
        zeros = model.initial_state(3)
        assert zeros.shape == (3, model.state_size) and zeros.dtype == torch.float32
        assert not zeros.any()


def test_lstm_state_is_h_then_c():
    model = make(core="lstm", hidden=8)
    obs, start = torch.randn(2, 4, 5), torch.randn(2, 16)
    _, states = model(obs, start)
    x = model.encoder(obs.flatten(0, 1)).view(2, 4, -1)
    h, (_, c_n) = model.core(x, (start[:, :8].unsqueeze(0).contiguous(), start[:, 8:].unsqueeze(0).contiguous()))
    torch.testing.assert_close(states[:, :, :8], h)
    torch.testing.assert_close(states[:, -1, 8:], c_n[0])


def test_the_core_carries_the_first_observation_to_later_steps():
    for core in ("gru", "lstm"):
        model = make(core=core)
        obs = torch.randn(2, 5, 5)
        changed = obs.clone()
        changed[:, 0] += 1.0
        zeros = model.initial_state(2)
        assert not torch.allclose(model(obs, zeros)[0][:, -1], model(changed, zeros)[0][:, -1])


def test_q_is_dqns_dueling_head_on_the_core_output():
    model = make(dueling=True)
    assert isinstance(model.head, DQN) and model.head.dueling
    q, states = model(torch.randn(3, 4, 5), model.initial_state(3))
    torch.testing.assert_close(q, model.head(states.reshape(12, 8)).view(3, 4, 3))  # a GRU's state is its output


def test_from_config_reads_core_hidden_and_dueling_with_defaults():
    cfg = SimpleNamespace(encoder_hidden_size_list=[16])
    default = RecurrentQ.from_config(BOX, 3, cfg)
    assert default.core_kind == "lstm" and default.hidden_size == 128 and not default.head.dueling
    custom = RecurrentQ.from_config(BOX, 3, SimpleNamespace(encoder_hidden_size_list=[16], core="gru",
                                                             core_hidden=32, dueling=True))
    assert custom.core_kind == "gru" and custom.hidden_size == 32 and custom.head.dueling
    assert custom.encoder[0].out_features == 16


def test_bad_core_and_bad_state_are_one_line_errors():
    with pytest.raises(ValueError, match=r"policy\.model\.core must be one of gru, lstm"):
        RecurrentQ(BOX, 3, core="rnn")
    model = make()
    with pytest.raises(ValueError, match=r"recurrent state must be \[2, 8\]"):
        model(torch.zeros(2, 3, 5), torch.zeros(2, 16))
