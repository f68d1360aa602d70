"""An encoder of the user's own (``policy.model.encoder=module:Class`` with ``encoder_kwargs``), from a
module in the current directory, in DQN, SAC and RND, as SB3's ``features_extractor_class`` does."""
from __future__ import annotations

import sys

import pytest
import torch

from rlpipe.cli.main import main
from rlpipe.utils.checkpoint import load_checkpoint
from tests.cli_errors import one_line_error
from tests.tiny_run import TINY_RUN

MODULE = "rlpipe_test_user_encoder"
SOURCE = '''
import torch
from gymnasium import spaces
from torch import nn

CALLS = []


class TinyEncoder(nn.Module):
    """Observations (a flat Box) -> width ReLU features; records the width of every call."""

    def __init__(self, observation_space: spaces.Box, width: int) -> None:
        super().__init__()
        self.n_features = width
        self.layer = nn.Linear(observation_space.shape[0], width)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        CALLS.append(self.n_features)
        return torch.relu(self.layer(obs.float()))
'''


@pytest.fixture
def in_user_dir(tmp_path, monkeypatch):
    """The current directory holds the user's module (the CLI imports from it, as ``python -m`` would)."""
    (tmp_path / f"{MODULE}.py").write_text(SOURCE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield tmp_path
    sys.modules.pop(MODULE, None)


@pytest.mark.parametrize(("preset", "keys", "network"), [
    ("cartpole-dqn", ["policy.model.encoder", "policy.model.encoder_kwargs"], "model"),
    ("pendulum-sac", ["policy.model.encoder", "policy.model.encoder_kwargs"], "actor"),
    ("deepsea-dqn-rnd", ["reward_model.encoder", "reward_model.encoder_kwargs"], "predictor"),
])
def test_a_user_encoder_trains_in_the_network(in_user_dir, preset, keys, network):
    run_dir = in_user_dir / "run"
    encoder, kwargs = keys
    assert main(["train", preset, *TINY_RUN, "policy.random_collect_size=50", f"{encoder}={MODULE}:TinyEncoder",
                 f"{kwargs}={{width: 7}}", "--run-dir", str(run_dir)]) == 0
    assert set(sys.modules[MODULE].CALLS) == {7}  # the class's own forward ran, with its own settings
    state = load_checkpoint(run_dir / "ckpt" / "final.pth.tar")
    holder = state["reward_model"] if network == "predictor" else state["policy"]
    weights = [tensor for name, tensor in _flat(holder) if name.endswith("layer.weight")]
    assert weights and all(w.shape[0] == 7 for w in weights)


def _flat(state, prefix=""):
    """``(dotted name, tensor)`` of every tensor in a nested state dict."""
    for key, value in state.items():
        if isinstance(value, dict):
            yield from _flat(value, f"{prefix}{key}.")
        elif isinstance(value, torch.Tensor):
            yield f"{prefix}{key}", value


def test_a_user_encoder_that_cannot_be_had_is_one_line(in_user_dir, capsys):
    base = ["train", "cartpole-dqn", *TINY_RUN, "--run-dir", str(in_user_dir / "run")]
    err = one_line_error(capsys, [*base, f"policy.model.encoder={MODULE}:Missing"])
    assert f"module '{MODULE}' has no 'Missing'" in err
    err = one_line_error(capsys, [*base, f"policy.model.encoder={MODULE}:TinyEncoder",
                                  "policy.model.encoder_kwargs={}"])
    assert "could not be built with encoder_kwargs {}" in err and "width" in err
    assert not (in_user_dir / "run").exists()
