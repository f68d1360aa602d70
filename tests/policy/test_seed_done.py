"""The seed's transitions say ``done``: every policy type and n-step read it as ``terminated``, with one warning."""
from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

from rlpipe.config import load_config
from rlpipe.config.algorithms import ALGORITHMS, ActionKind
from rlpipe.data.nstep import NStepAccumulator
from rlpipe.recipes.build import make_policy
from rlpipe.utils import batch as batch_helpers

CARTPOLE = ["policy.model.obs_shape=4", "policy.model.action_shape=2", "policy.nstep=1"]
PRESETS = {"dqn": "cartpole-dqn", "c51": "cartpole-c51", "qrdqn": "cartpole-qrdqn", "sac": "pendulum-sac",
           "td3": "pendulum-td3", "ddpg": "pendulum-ddpg", "crossq": "pendulum-crossq", "td3_bc": "hopper-medium-td3bc",
           "iql": "hopper-medium-iql", "cql": "hopper-medium-cql", "bc": "hopper-medium-bc",
           "r2d2": "popgym-repeatprevious-r2d2"}


def seed_batch(kind: ActionKind, size: int = 16, steps: int | None = None) -> dict[str, torch.Tensor]:
    """Dicts of torch tensors with ``done`` and neither ``terminated`` nor ``truncated``, as DI-engine's data;
    with ``steps``, sequences of that many steps (fields [size, steps, ...], a ``mask`` and a zero ``core_state``
    of 128 units, as an R2D2 user brings them)."""
    g = torch.Generator().manual_seed(0)
    obs = 4 if kind is ActionKind.DISCRETE else 3
    rows = (size,) if steps is None else (size, steps)
    action = (torch.randint(0, 2, rows, generator=g) if kind is ActionKind.DISCRETE
              else torch.rand(*rows, 1, generator=g) * 2 - 1)
    batch = {"obs": torch.randn(*rows, obs, generator=g), "action": action, "reward": torch.randn(rows, generator=g),
             "next_obs": torch.randn(*rows, obs, generator=g), "done": torch.rand(rows, generator=g) < 0.3}
    if steps is not None:
        batch |= {"mask": torch.ones(rows, dtype=torch.bool), "core_state": torch.zeros(size, 128)}
    return batch


@pytest.fixture
def fresh_warning(monkeypatch):
    monkeypatch.setattr(batch_helpers, "_warned_done", False)


def test_every_policy_type_has_a_preset_here():
    assert set(PRESETS) == set(ALGORITHMS)


@pytest.mark.parametrize("policy_type", sorted(PRESETS))
def test_one_update_from_a_batch_with_only_done(policy_type, fresh_warning, caplog):
    row = ALGORITHMS[policy_type]
    sizes = ["policy.model.obs_shape=4", "policy.model.action_shape=2"] if row.action_kind is ActionKind.DISCRETE \
        else ["policy.model.obs_shape=3", "policy.model.action_shape=1"]
    policy = make_policy(load_config(PRESETS[policy_type], [*sizes, "policy.nstep=1"]))
    steps = 12 if row.sequences else None
    with caplog.at_level(logging.WARNING):
        first = policy.learn_mode.forward(seed_batch(row.action_kind, steps=steps))
        policy.learn_mode.forward(seed_batch(row.action_kind, steps=steps))
    assert np.isfinite(float(first["total_loss"]))
    assert [r.message for r in caplog.records].count(batch_helpers.SEED_DONE_WARNING) == 1


def test_done_means_terminated_for_the_update(fresh_warning):
    with_done = seed_batch(ActionKind.DISCRETE)
    with_terminated = {**{k: v for k, v in with_done.items() if k != "done"}, "terminated": with_done["done"]}
    outputs = []
    for batch in (with_done, with_terminated):
        torch.manual_seed(0)
        policy = make_policy(load_config("cartpole-dqn", CARTPOLE))
        outputs.append(float(policy.learn_mode.forward(batch)["total_loss"]))
    assert outputs[0] == outputs[1]


def test_a_batch_with_neither_is_one_line_naming_the_fields():
    policy = make_policy(load_config("cartpole-dqn", CARTPOLE))
    batch = seed_batch(ActionKind.DISCRETE)
    del batch["done"]
    with pytest.raises(ValueError, match="needs a 'terminated' field") as err:
        policy.learn_mode.forward(batch)
    assert "\n" not in str(err.value)


def test_nstep_reads_done_as_terminated(fresh_warning):
    rows = {"env_id": np.zeros(4, dtype=np.int64), "reward": np.ones(4, dtype=np.float32),
            "done": np.array([False, True, False, False])}
    out = NStepAccumulator(nstep=3, gamma=0.5).add(rows)
    # the episode ends at step 1 (terminated), so steps 0 and 1 are ready; steps 2-3 wait for their window
    np.testing.assert_allclose(out["reward"], [1.5, 1.0])
    np.testing.assert_array_equal(out["terminated"], [True, True])
    np.testing.assert_array_equal(out["truncated"], [False, False])
