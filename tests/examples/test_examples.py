"""The examples run as written (so they never rot), build what ``rlpipe train`` builds, and learn."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from rlpipe.config import load_config
from rlpipe.entry.build import build_parts
from rlpipe.entry.pipeline import use_training_pipeline
from rlpipe.framework import Task

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PRESETS = {"dqn": "cartpole-dqn", "dqn_per": "cartpole-dqn-per", "dqn_her": "bitflip-her-dqn"}


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
