"""DI-engine's data carry one-per-row columns as ``[B, 1]`` (``action`` as a long tensor of any
integer dtype, ``reward``), torch or numpy: every DQN-family type learns from them exactly as from
``[B]`` columns, through ``OffPolicyLearner``, and any other shape is one line naming the field
(the action's: tests/policy/test_seed_action_column.py)."""
from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch

from rlpipe.config import load_config
from rlpipe.config.algorithms import ALGORITHMS, ActionKind
from rlpipe.data import DequeBuffer
from rlpipe.framework import OnlineRLContext
from rlpipe.framework.middleware import OffPolicyLearner
from rlpipe.recipes.build import make_policy

from .test_seed_done import PRESETS

DISCRETE = sorted(name for name, row in ALGORITHMS.items()
                  if row.action_kind is ActionKind.DISCRETE and not row.sequences)  # r2d2 learns from sequences
CARTPOLE = ["policy.model.obs_shape=4", "policy.model.action_shape=2", "policy.nstep=1"]
SEED_CFG = SimpleNamespace(policy=SimpleNamespace(learn=SimpleNamespace(batch_size=8, update_per_collect=3),
                                                  collect=SimpleNamespace(unroll_len=1)))

Form = Callable[[int], dict[str, Any]]
"""The fields of transition ``i`` whose form varies (its action and reward)."""

FORMS: dict[str, Form] = {
    "torch-int64-[B]": lambda i: {"action": torch.tensor(i % 2), "reward": torch.tensor(i / 3)},
    "torch-int64-[B,1]": lambda i: {"action": torch.tensor([i % 2]), "reward": torch.tensor([i / 3])},
    "torch-int32-[B,1]": lambda i: {"action": torch.tensor([i % 2], dtype=torch.int32),
                                    "reward": torch.tensor(i / 3)},
    "numpy-int32-[B,1]": lambda i: {"action": np.array([i % 2], dtype=np.int32),
                                    "reward": np.array([i / 3], dtype=np.float32)},
    "numpy-int64-[B]": lambda i: {"action": np.int64(i % 2), "reward": np.float32(i / 3)},
}


def transition(i: int, form: Form) -> dict[str, Any]:
    """Transition ``i`` as the seed pushes it, its observations as torch tensors."""
    return {"obs": torch.linspace(-1, 1, 4) * (i % 7) / 7, "next_obs": torch.linspace(-1, 1, 4) * ((i + 1) % 7) / 7,
            "done": torch.tensor(i % 5 == 4), **form(i)}


class Recording:
    """A learn mode that keeps each update's output."""

    def __init__(self, learn_mode: Any) -> None:
        self.learn_mode = learn_mode
        self.outputs: list[dict[str, Any]] = []

    def forward(self, data: Any) -> dict[str, Any]:
        out = self.learn_mode.forward(data)
        self.outputs.append(out)
        return out


def learn(policy_type: str, form: Form) -> list[dict[str, Any]]:
    """The outputs of one ``OffPolicyLearner`` call (3 updates) on 20 transitions of ``form``."""
    buffer = DequeBuffer(size=32, seed=0)
    for i in range(20):
        buffer.push(transition(i, form))
    torch.manual_seed(0)
    learn_mode = Recording(make_policy(load_config(PRESETS[policy_type], CARTPOLE)).learn_mode)
    OffPolicyLearner(SEED_CFG, learn_mode, buffer)(OnlineRLContext())
    return learn_mode.outputs


@pytest.mark.parametrize("policy_type", DISCRETE)
def test_b1_columns_learn_exactly_as_b_columns(policy_type):
    expected = learn(policy_type, FORMS["torch-int64-[B]"])
    assert len(expected) == 3 and len({out["total_loss"] for out in expected}) > 1
    for name, form in FORMS.items():
        got = learn(policy_type, form)
        assert [out["total_loss"] for out in got] == [out["total_loss"] for out in expected], name
        for out, want in zip(got, expected, strict=True):
            assert out["priority"].shape == (SEED_CFG.policy.learn.batch_size,), name
            np.testing.assert_array_equal(out["priority"], want["priority"], err_msg=name)


def test_a_reward_column_of_another_shape_is_one_line_naming_it():
    policy = make_policy(load_config("cartpole-dqn", CARTPOLE))
    batch = {"obs": torch.zeros(4, 4), "next_obs": torch.zeros(4, 4), "action": torch.zeros(4, dtype=torch.int64),
             "reward": torch.zeros(4, 2), "terminated": torch.zeros(4, dtype=torch.bool)}
    with pytest.raises(ValueError, match=r"^batch field 'reward' must hold one value per row, \[B\] or \[B, 1\]; "
                                         r"got shape \(4, 2\)$"):
        policy.learn_mode.forward(batch)
