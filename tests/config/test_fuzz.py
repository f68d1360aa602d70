"""Malformed configs and overrides, fuzzed: every one is refused in one line that names the key
or the file, and none hangs."""
from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from rlpipe.config import ConfigError, load_config
from rlpipe.config.describe import describe_config
from rlpipe.recipes.build import check_buffer_fits

BAD_VALUES = {  # values each kind of key must refuse
    "int": ["abc", "[1, 2]", "{a: 1}", "1.5", "true"],
    "float": ["abc", "[0.1]", "{a: 1}"],
    "bool": ["maybe", "[true]", "3"],
    "str": ["[1]", "{a: 1}"],
    "Literal": ["nonsense", "[1]"],
    "list": ["abc", "{a: 1}"],
}
MALFORMED_OVERRIDES = ["=", "=1", "seed", "policy..learn=1", "policy.learn=3", "policy=[1]", "seed=4294967296",
                       "seed=-1", "nope.nope=1", "policy.learn.batchsize=3", "run.max_env_step=1e400",
                       "policy.other.replay_buffer.replay_buffer_size=1000000000000000",
                       "policy.model.encoder_hidden_size_list=[0]", "policy.learn.learning_rate=-1"]


def key_cases() -> Iterator[tuple[str, str]]:
    for info in describe_config(load_config("cartpole-dqn")):
        kind = next((k for k in ("Literal", "list", "bool", "int", "float", "str") if info.type.startswith(k)), None)
        if kind is None or info.key == "exp_name" or ("| None" in info.type and kind == "str"):
            continue
        for value in BAD_VALUES[kind][:2]:
            yield info.key, value


CASES = [[f"{key}={value}"] for key, value in key_cases()] + [[text] for text in MALFORMED_OVERRIDES]


class HungError(Exception):
    """A config took more than the allowed seconds to refuse."""


def refuse(overrides: list[str]) -> str:
    """The one-line error for ``overrides`` on the cartpole preset, within 10 seconds."""
    def alarm(signum, frame):
        raise HungError(overrides)

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(10)
    try:
        with pytest.raises(ConfigError) as err:
            cfg = load_config("cartpole-dqn", overrides)
            check_buffer_fits(load_config(cfg, ["policy.model.obs_shape=4", "policy.model.action_shape=2"]))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    message = str(err.value)
    assert message and "\n" not in message and "Traceback" not in message
    return message


def test_at_least_a_hundred_malformed_overrides_are_each_one_line():
    assert len(CASES) >= 100
    for overrides in CASES:
        message = refuse(overrides)
        section = overrides[0].split("=", 1)[0].split(".")[0]
        assert section in message and ("config key '" in message or "override" in message), (overrides, message)


@pytest.mark.parametrize(("content", "message"), [
    (b"", "the config is empty"),
    (b"\xff\xfe seed: 1\n", "not a UTF-8 text file"),
    (b"- 1\n- 2\n", "expected a mapping at the top level"),
    (b"seed: [\n", "not valid YAML"),
    (b"seed: !!python/object:os.system {}\n", "not valid YAML"),
    (b"a: &a [x, x, x, x, x, x, x, x, x, x]\n" + b"".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n".encode() for i in range(8)),
     "aliases expand to more than"),
    (b"# " + b"x" * (1 << 20) + b"\n", "too large for a config"),
])
def test_malformed_config_files_are_each_one_line(tmp_path: Path, content: bytes, message: str):
    path = tmp_path / "config.yaml"
    path.write_bytes(content)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert message in str(err.value) and str(path) in str(err.value) and "\n" not in str(err.value)
