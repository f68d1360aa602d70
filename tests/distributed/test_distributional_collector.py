"""The collect half (what each Ray collector runs) with the distributional types: epsilon or
noisy networks as the table says, and the learner's acting state loaded."""
from __future__ import annotations

import pytest
import torch

from rlpipe.config import load_config
from rlpipe.distributed import CollectorHalf
from rlpipe.recipes.build import build_parts

from .test_collector_half import SMALL


@pytest.mark.parametrize(("preset", "noisy"), [("cartpole-c51", False), ("cartpole-c51", True),
                                               ("cartpole-qrdqn", True)])
def test_a_collector_acts_with_the_learners_weights_and_its_exploration(preset, noisy):
    with build_parts(load_config(preset, [*SMALL, f"policy.model.noisy={str(noisy).lower()}"])) as parts:
        cfg, learner = parts.cfg, parts.policy
        for p in learner.model.parameters():
            p.data.add_(0.25)
        weights = learner.acting_state_dict()
    half = CollectorHalf(cfg, index=0)
    try:
        fragment = half.collect(0, (3, weights))
        assert fragment.policy_version == 3 and fragment.env_steps == 40
        assert (fragment.eps is None) == noisy  # noisy networks replace the epsilon schedule
        for name, value in half._policy.model.state_dict().items():
            assert torch.equal(value, weights["model"][name]), name
    finally:
        half.close()
