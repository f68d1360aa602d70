"""``run.flush_denormal``: the process that builds a run computes subnormal floats as zero, or, set
false, as IEEE arithmetic does (Adam's moments decay into that range and x86 is slow there)."""
from __future__ import annotations

import pytest
import torch

from rlpipe.config import load_config
from rlpipe.recipes.build import build_parts
from tests.tiny_run import TINY_RUN

SUBNORMAL = 1e-39  # below float32's smallest normal number, 1.18e-38


@pytest.fixture(autouse=True)
def restore_the_flag():
    yield
    torch.set_flush_denormal(True)  # the default of every run built in this process


@pytest.mark.parametrize("flush", [True, False])
def test_a_built_run_computes_subnormal_floats_as_the_config_says(flush):
    cfg = load_config("cartpole-dqn", [*TINY_RUN, f"run.flush_denormal={str(flush).lower()}"])
    with build_parts(cfg):
        product = (torch.tensor([SUBNORMAL]) * 2.0).item()
    assert (product == 0.0) is flush
    if not flush:
        assert product == pytest.approx(2 * SUBNORMAL, rel=1e-5)
