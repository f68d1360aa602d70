"""The seed's discrete actions often come as ``[B, 1]`` columns: the DQN family reads them as ``[B]``."""
from __future__ import annotations

import pytest
import torch

from rlpipe.config import load_config
from rlpipe.data import DequeBuffer
from rlpipe.framework import OnlineRLContext
from rlpipe.framework.middleware import OffPolicyLearner
from rlpipe.recipes.build import make_policy

SIZES = ["policy.model.obs_shape=4", "policy.model.action_shape=2", "policy.nstep=1",
         "policy.learn.update_per_collect=1", "policy.learn.batch_size=16"]
PRESETS = ("cartpole-dqn", "cartpole-c51", "cartpole-qrdqn")


def seed_transitions(action_column: bool, size: int = 16) -> list[dict[str, torch.Tensor]]:
    """One transition per row, torch tensors as DI-engine's data; ``action`` a ``[1]`` tensor or a scalar."""
    g = torch.Generator().manual_seed(0)
    rows = []
    for _ in range(size):
        action = torch.randint(0, 2, (1,) if action_column else (), generator=g)
        rows.append({"obs": torch.randn(4, generator=g), "action": action, "reward": torch.randn((), generator=g),
                     "next_obs": torch.randn(4, generator=g), "terminated": torch.rand((), generator=g) < 0.3,
                     "truncated": torch.tensor(False)})
    return rows


def one_update(preset: str, action_column: bool) -> tuple[float, list[torch.Tensor]]:
    """The loss of one ``OffPolicyLearner`` update over a buffer of the seed's transitions, and the new weights."""
    torch.manual_seed(0)
    cfg = load_config(preset, SIZES)
    policy = make_policy(cfg)
    buffer = DequeBuffer(size=64)
    for row in seed_transitions(action_column):
        buffer.push(row)
    ctx = OnlineRLContext()
    OffPolicyLearner(cfg, policy.learn_mode, buffer)(ctx)
    return float(ctx.train_output[0]["total_loss"]), [p.detach().clone() for p in policy.model.parameters()]


@pytest.mark.parametrize("preset", PRESETS)
def test_an_action_column_learns_as_a_flat_action(preset):
    flat_loss, flat_weights = one_update(preset, action_column=False)
    column_loss, column_weights = one_update(preset, action_column=True)
    # the same update up to float rounding (the buffer gathers the two column shapes differently)
    assert column_loss == pytest.approx(flat_loss, rel=1e-5)
    assert all(torch.allclose(a, b, rtol=1e-5, atol=1e-7) for a, b in zip(flat_weights, column_weights, strict=True))


def test_two_actions_per_row_is_one_line():
    policy = make_policy(load_config("cartpole-dqn", SIZES))
    batch = {"obs": torch.zeros(4, 4), "action": torch.zeros(4, 2, dtype=torch.int64), "reward": torch.zeros(4),
             "next_obs": torch.zeros(4, 4), "terminated": torch.zeros(4)}
    with pytest.raises(ValueError, match=r"batch field 'action' .* got shape \(4, 2\)"):
        policy.learn_mode.forward(batch)
