"""The search space of ``rlpipe tune`` as written on the command line."""
from __future__ import annotations

import pytest

from rlpipe.config import ConfigError, load_config
from rlpipe.tools.search_space import Choice, Range, as_overrides, parse_param, split_arguments


@pytest.mark.parametrize(("text", "expected"), [
    ("policy.learn.learning_rate=1e-4:1e-2", Range("policy.learn.learning_rate", 1e-4, 1e-2, False, True)),
    ("policy.discount_factor=0.9:0.999", Range("policy.discount_factor", 0.9, 0.999, False, False)),
    ("policy.learn.batch_size=32:256", Range("policy.learn.batch_size", 32, 256, True, False)),
    ("policy.learn.target_update_freq=10:1000", Range("policy.learn.target_update_freq", 10, 1000, True, True)),
    ("policy.learn.batch_size=log:32:256", Range("policy.learn.batch_size", 32, 256, True, True)),
    ("policy.nstep=[1, 3, 5]", Choice("policy.nstep", (1, 3, 5))),
    ("policy.model.encoder_hidden_size_list=[[64], [64, 64]]",
     Choice("policy.model.encoder_hidden_size_list", ([64], [64, 64]))),
    ("run.max_env_step=20000", None),
    ("env.env_id=my_envs:Corridor-v0", None),  # a colon, but not a range
    ("policy.model.encoder_hidden_size_list=[[64, 64]]",
     Choice("policy.model.encoder_hidden_size_list", ([64, 64],))),  # one choice: a fixed list value
])
def test_parse(text, expected):
    assert parse_param(text) == expected


@pytest.mark.parametrize(("text", "message"), [
    ("policy.learn.learning_rate=1e-2:1e-4", "needs low < high"),
    ("policy.learn.learning_rate=log:-1:1", "needs low > 0"),
    ("policy.model.encoder_hidden_size_list=[64, 64]", "lists a choice twice"),
    ("policy.nstep=[]", "needs at least one choice"),
])
def test_bad_params_are_one_line(text, message):
    with pytest.raises(ConfigError, match=message):
        parse_param(text)


class FakeTrial:
    """Answers each suggestion with the last value it may take."""

    def suggest_int(self, name, low, high, *, log=False):
        return high

    def suggest_float(self, name, low, high, *, log=False):
        return high

    def suggest_categorical(self, name, choices):
        assert all(isinstance(c, (int, float, str, bool)) or c is None for c in choices)  # what Optuna stores
        return choices[-1]


def test_suggested_values_become_overrides_of_a_valid_config():
    space, fixed = split_arguments(["policy.learn.learning_rate=1e-4:1e-2", "run.max_env_step=300",
                                    "policy.model.encoder_hidden_size_list=[[32], [64, 64]]"])
    assert fixed == ["run.max_env_step=300"]
    values = {p.key: p.suggest(FakeTrial()) for p in space}
    cfg = load_config("cartpole-dqn", [*fixed, *as_overrides(space, values)])
    assert cfg.policy.learn.learning_rate == 1e-2 and cfg.policy.model.encoder_hidden_size_list == [64, 64]
    assert cfg.run.max_env_step == 300


def test_a_key_searched_twice_is_refused():
    with pytest.raises(ConfigError, match=r"'policy\.nstep' is searched twice"):
        split_arguments(["policy.nstep=[1, 3]", "policy.nstep=1:5"])
