"""The examples run as written (so they never rot), build what ``rlpipe train`` builds, and learn.

Learning budgets: CartPole's mean evaluation return reached 195 by 5,376 env steps at the
latest over seeds 0-4 under ``ATEN_CPU_CAPABILITY=avx2`` and ``=default`` (full solves at 475
took 8,736-38,976), so a 20,000-step budget for 195 leaves a margin of more than 3x. HER on
8 bits reached 0.9 by 2,696 env steps at the latest on the same runs: 15,000 leave 5x.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from rlpipe.config import load_config
from rlpipe.framework import Task
from rlpipe.recipes.build import build_parts
from rlpipe.recipes.pipeline import use_training_pipeline

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PRESETS = {"dqn": "cartpole-dqn", "dqn_per": "cartpole-dqn-per", "dqn_her": "bitflip-her-dqn", "sac": "pendulum-sac",
           "dqn_rnd": "deepsea-dqn-rnd"}


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def middleware_name(fn) -> str:
    return getattr(fn, "__qualname__", type(fn).__qualname__)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_example_uses_the_pipeline_rlpipe_train_builds(name, monkeypatch):
    seen: list[list[str]] = []
    monkeypatch.setattr(Task, "run", lambda self, max_step=None: seen.append(
        [middleware_name(fn) for fn in self.middleware]))
    load(name).main(["seed=0"])
    with build_parts(load_config(PRESETS[name], ["seed=0"])) as parts:
        cli = [middleware_name(fn) for fn in use_training_pipeline(Task(), parts).middleware]
    assert seen == [cli]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["dqn", "dqn_per"])
def test_cartpole_example_balances_the_pole(name):
    assert load(name).main(["seed=1", "env.stop_value=195", "run.max_env_step=20000"]) >= 195


@pytest.mark.slow
def test_dqn_her_example_solves_8_bit_flip():
    assert load("dqn_her").main(["seed=0", "env.env_kwargs.n_bits=8", "run.max_env_step=15000"]) >= 0.9


def test_a_pipeline_written_as_the_example_is_seeded_whole():
    overrides = ["seed=3", "run.max_env_step=960", "policy.eval.evaluator.eval_freq=100", "run.progress=false"]
    first, second = (load("dqn").main(overrides) for _ in range(2))
    assert first == second  # network init, exploration, envs and sampling all follow the seed
