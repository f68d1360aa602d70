"""The examples run as written (so they never rot) and learn within small budgets."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True)
def one_torch_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_dqn_example_solves_cartpole():
    torch.manual_seed(0)
    assert load("dqn").main(["seed=0", "run.max_env_step=20000"]) >= 475


def test_dqn_per_example_solves_cartpole():
    torch.manual_seed(0)
    assert load("dqn_per").main(["seed=0", "run.max_env_step=20000"]) >= 475


def test_dqn_her_example_solves_8_bit_flip():
    torch.manual_seed(0)
    assert load("dqn_her").main(["seed=0", "env.env_kwargs.n_bits=8", "run.max_env_step=15000"]) >= 0.9
