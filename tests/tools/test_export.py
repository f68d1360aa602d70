"""``rlpipe export``: the ONNX and TorchScript graphs act as ``rlpipe.load(run).predict`` does."""
from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

import rlpipe
from rlpipe.cli.main import main
from rlpipe.config import load_config
from rlpipe.entry.agent import Agent
from rlpipe.recipes.build import make_policy
from rlpipe.tools.export import ExportError, _affine_action_map
from tests.cli_errors import one_line_error
from tests.tiny_run import TINY_RUN

ort = pytest.importorskip("onnxruntime")

RUNS = {
    "cartpole-dqn": ["cartpole-dqn"],
    "cartpole-c51": ["cartpole-c51"],  # Q: the categoricals' means
    "cartpole-c51-noisy-dueling": ["cartpole-c51", "policy.model.noisy=true", "policy.model.dueling=true"],
    "cartpole-qrdqn": ["cartpole-qrdqn"],  # Q: the quantiles' means
    "pendulum-sac": ["pendulum-sac", "policy.random_collect_size=50", "policy.model.obs_norm=true"],  # normalisation
    "pendulum-td3": ["pendulum-td3", "policy.random_collect_size=50"],
    "minatar-breakout-dqn": ["minatar-breakout-dqn", "policy.random_collect_size=50"],  # uint8 [C, 10, 10] images
}
"""Run name: the preset and its overrides."""


@pytest.fixture(scope="module", params=sorted(RUNS))
def run(request, tmp_path_factory) -> Path:
    preset, *overrides = RUNS[request.param]
    run_dir = tmp_path_factory.mktemp("runs") / request.param
    assert main(["train", preset, *TINY_RUN, *overrides, "--run-dir", str(run_dir)]) == 0
    return run_dir


def observations(agent, n: int = 100) -> np.ndarray:
    """``n`` observations spread over the space (unbounded dimensions cut to [-2, 2]), float32; or, for
    MinAtar's 0/1 images, sparse ones (a tenth of the cells set, as in its games) in their own dtype."""
    space, rng = agent.observation_space, np.random.default_rng(0)
    if np.issubdtype(space.dtype, np.integer):
        return (rng.random((n, *space.shape)) < 0.1).astype(space.dtype)
    low, high = np.maximum(space.low, -2), np.minimum(space.high, 2)
    return rng.uniform(low, high, (n, *space.shape)).astype(np.float32)


def export(run: Path, fmt: str, out: Path, capsys) -> dict:
    assert main(["export", str(run), "--format", fmt, "--out", str(out)]) == 0
    return json.loads(capsys.readouterr().out)


def test_onnx_acts_as_predict(run, tmp_path, capsys):
    out = tmp_path / "policy.onnx"
    printed = export(run, "onnx", out, capsys)
    agent = rlpipe.load(run)
    obs = observations(agent)
    expected = agent.predict(obs, deterministic=True)
    (actions,) = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(None, {"obs": obs})
    assert actions.shape == expected.shape and actions.dtype == expected.dtype
    if isinstance(agent.action_space, gym.spaces.Discrete):
        assert len(np.unique(expected)) > 1  # the observations tell the actions apart
        np.testing.assert_array_equal(actions, expected)
        assert printed["output"] == "action: int64 [N]"
    else:
        assert np.abs(expected).max() > 0.1  # scaled to Pendulum's [-2, 2], not left in [-1, 1] unchecked
        np.testing.assert_allclose(actions, expected, rtol=0, atol=1e-5)
        assert printed["output"] == "action: float32 [N, 1]"
    assert printed["input"] == f"obs: {obs.dtype} [N, {', '.join(map(str, obs.shape[1:]))}]"


def test_torchscript_acts_as_predict(run, tmp_path, capsys):
    out = tmp_path / "policy.pt"
    export(run, "torchscript", out, capsys)
    agent = rlpipe.load(run)
    obs = observations(agent)
    actions = torch.jit.load(str(out))(torch.from_numpy(obs)).numpy()
    np.testing.assert_allclose(actions, agent.predict(obs, deterministic=True), rtol=0, atol=1e-5)


def test_the_action_map_is_the_env_factorys_rescaling():
    cfg = load_config("pendulum-sac", ["policy.model.obs_shape=3", "policy.model.action_shape=1"])
    agent = Agent(cfg, make_policy(cfg))  # Pendulum's torque is in [-2, 2]
    gain, bias = _affine_action_map(agent.action_wrappers, 1)
    np.testing.assert_allclose(gain, [2.0])
    np.testing.assert_allclose(bias, [0.0])


def test_an_action_map_that_is_not_affine_is_refused():
    class Cube(gym.ActionWrapper):
        def action(self, action):
            return np.asarray(action) ** 3

    with pytest.raises(ExportError, match=r"action wrappers \(Cube\) do not rescale actions affinely"):
        _affine_action_map([Cube(gym.make("Pendulum-v1"))], 1)


def test_a_missing_run_is_one_line(tmp_path, capsys):
    err = one_line_error(capsys, ["export", str(tmp_path / "nope"), "--out", str(tmp_path / "p.onnx")])
    assert "no run directory or checkpoint at" in err
