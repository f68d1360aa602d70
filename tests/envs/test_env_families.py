"""The table of env families: ids told apart in one place, and a new family that is one module and one
row (here a toy family in this file: its importer, maker, settings and training wrappers all used)."""
from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import pytest

from rlpipe.envs import EnvSettingError, EnvSettings, env_factory, families, make_vector_env
from rlpipe.envs.families import EnvFamily, MakeEnv, env_families, family_of, family_settings
from rlpipe.envs.protocol import CoreStep
from rlpipe.envs.vector_wrappers import CoreWrapper
from rlpipe.errors import MissingDependencyError


@pytest.mark.parametrize(("env_id", "family"), [
    ("ALE/Pong-v5", "atari"), ("MinAtar/Breakout-v1", "minatar"), ("MiniGrid-DoorKey-5x5-v0", "minigrid"),
    ("FetchReach-v4", "robotics"), ("popgym-RepeatPreviousEasy-v0", "popgym"),
    ("CartPole-v1", "gymnasium"), ("rlpipe/DeepSea-v0", "gymnasium"),
    ("my_envs:Corridor-v0", "gymnasium"),
])
def test_each_id_has_one_family(env_id, family):
    assert family_of(env_id).name == family
    assert [f.name for f in env_families()][-1] == "gymnasium"  # the catch-all comes last


def test_a_family_section_for_another_familys_env_is_named():
    with pytest.raises(EnvSettingError, match=r"^atari: only atari envs \(ids like 'ALE/\.\.\.'\) read it; "
                                              r"env 'CartPole-v1' is of the gymnasium family"):
        family_settings("CartPole-v1", {"atari": {"noop_max": 0}})
    assert family_settings("ALE/Pong-v5", {"atari": {"noop_max": 0}}).noop_max == 0
    assert family_settings("ALE/Pong-v5", {"atari": None}) is None  # the family's defaults


@dataclass(frozen=True)
class ToySettings:
    length: int = 10


IMPORTED: list[str] = []


def import_toy(env_id: str) -> None:
    IMPORTED.append(env_id)
    if "Toy/Walk-v0" not in gym.registry:
        gym.register("Toy/Walk-v0", entry_point="gymnasium.envs.classic_control:CartPoleEnv")


def make_toy(spec: MakeEnv) -> gym.Env:
    length = (spec.settings or ToySettings()).length
    return gym.wrappers.TimeLimit(gym.make(spec.env_id, **spec.kwargs), length)


class TenfoldRewards(CoreWrapper):
    def step(self, action: np.ndarray) -> CoreStep:
        step = self.env.step(action)
        return dataclasses.replace(step, reward=step.reward * 10)


TOY = EnvFamily("toy", ("Toy/",), extra="toy", importer=import_toy, maker=make_toy, settings=ToySettings,
                train_wrappers=TenfoldRewards)
"""All a new family needs (with its module's importer, maker and wrappers): one row."""


def test_a_new_family_is_one_module_and_one_row(monkeypatch):
    monkeypatch.setattr(families, "env_families", lambda: (TOY, *env_families()))
    assert family_of("Toy/Walk-v0") is TOY
    env = env_factory("Toy/Walk-v0", family_settings=ToySettings(length=3))()
    env.reset(seed=0)
    assert [env.step(0)[3] for _ in range(3)] == [False, False, True] and IMPORTED  # its maker, its settings
    train = make_vector_env(EnvSettings("Toy/Walk-v0", family_settings=ToySettings(), train=True), 2, seed=0)
    play = make_vector_env(EnvSettings("Toy/Walk-v0", family_settings=ToySettings()), 2, seed=0)
    try:
        actions = np.zeros(2, dtype=np.int64)
        assert train.step(actions)["reward"].tolist() == [10.0, 10.0]  # its training wrappers, in training only
        assert play.step(actions)["reward"].tolist() == [1.0, 1.0]
    finally:
        train.close()
        play.close()


def test_a_popgym_id_imports_popgym_or_names_its_extra(monkeypatch):
    env = env_factory("popgym-RepeatPreviousEasy-v0")()
    assert isinstance(env.observation_space, gym.spaces.Discrete)
    env.close()
    monkeypatch.setitem(sys.modules, "popgym", None)  # as if not installed
    with pytest.raises(MissingDependencyError, match=r"popgym package.*rlpipe\[popgym\]") as err:
        family_of("popgym-CountRecallEasy-v0").importer("popgym-CountRecallEasy-v0")
    assert "\n" not in str(err.value)
