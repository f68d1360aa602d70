"""``run.flush_denormal``: while a run is built and trains, its thread computes subnormal floats as zero,
or, set false, as IEEE arithmetic does (Adam's moments decay into that range and x86 is slow there);
afterwards the caller's own setting is back."""
from __future__ import annotations

import pytest
import torch

from rlpipe.config import load_config
from rlpipe.recipes import build
from rlpipe.recipes.build import build_parts, computes_subnormals_as_zero
from tests.tiny_run import TINY_RUN

SMALLEST_NORMAL = torch.finfo(torch.float32).tiny  # 1.18e-38


@pytest.fixture(autouse=True)
def torch_default_afterwards():
    yield
    torch.set_flush_denormal(False)


def subnormal_product() -> float:
    return (torch.tensor([SMALLEST_NORMAL]) * 0.5).item()


@pytest.mark.parametrize("before", [True, False])
@pytest.mark.parametrize("flush", [True, False])
def test_a_run_computes_subnormals_as_its_config_says_and_puts_the_callers_setting_back(flush, before):
    torch.set_flush_denormal(before)
    cfg = load_config("cartpole-dqn", [*TINY_RUN, f"run.flush_denormal={str(flush).lower()}"])
    with build_parts(cfg):
        product = subnormal_product()
        assert computes_subnormals_as_zero() is flush
    assert (product == 0.0) is flush
    if not flush:
        assert product == pytest.approx(SMALLEST_NORMAL / 2, rel=1e-5)
    assert computes_subnormals_as_zero() is before


def test_a_build_that_fails_puts_the_callers_setting_back(monkeypatch):
    def broken_policy(cfg):
        raise RuntimeError("no policy")

    monkeypatch.setattr(build, "make_policy", broken_policy)
    torch.set_flush_denormal(False)
    with pytest.raises(RuntimeError, match="no policy"):
        build_parts(load_config("cartpole-dqn", [*TINY_RUN, "run.flush_denormal=true"]))
    assert not computes_subnormals_as_zero()
