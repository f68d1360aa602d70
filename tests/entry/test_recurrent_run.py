"""R2D2 as a run: it trains from sequences, saves its sequence buffer with each checkpoint, resumes,
and its agent acts with the state it hands back."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import rlpipe
from rlpipe.cli.main import main
from rlpipe.config import load_config
from rlpipe.framework.middleware.ckpt_handler import latest_checkpoint
from rlpipe.recipes.build import SEQUENCE_INDEX_BYTES, make_buffer, transition_nbytes
from tests.tiny_run import TINY_RUN

R2D2 = ["run.max_env_step=2000", "run.progress=false", "policy.random_collect_size=300", "policy.learn.batch_size=8",
        "policy.collect.unroll_len=12", "policy.learn.burn_in=4", "policy.collect.sequence_stride=6",
        "policy.model.core_hidden=16", "policy.eval.evaluator.eval_every_env_steps=1000", "env.n_evaluator_episode=2",
        "env.evaluator_env_num=2", "env.collector_env_num=4", "run.save_freq=10"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    path = tmp_path_factory.mktemp("r2d2") / "run"
    rlpipe.train("popgym-repeatprevious-r2d2", path, overrides=R2D2)
    return path


def test_a_run_learns_from_sequences_and_saves_them(run):
    summary = rlpipe.train(run / "config.yaml", run, overrides=["run.max_env_step=3000"], resume=True).summary
    assert summary.env_step >= 3000 and summary.train_iter > 20
    cfg = load_config(run / "config.yaml")
    unit = latest_checkpoint(run)
    loaded = [make_buffer(cfg) for _ in range(2)]
    for buffer in loaded:
        buffer.load_data(str(unit.buffer_path))
    assert loaded[0].count() == min(summary.env_step, cfg.policy.other.replay_buffer.replay_buffer_size)
    batches = [buffer.sample_batch(8, unroll_len=12) for buffer in loaded]  # the same buffer, RNG included
    assert batches[0].data["obs"].shape == (8, 12) and batches[0].data["core_state"].shape == (8, 16)
    np.testing.assert_array_equal(batches[0].indices, batches[1].indices)


def test_the_agent_acts_from_the_state_it_returns(run):
    agent = rlpipe.load(run)
    assert agent.recurrent
    first, state = agent.predict(0)
    assert agent.action_space.contains(first) and state.shape == (16,) and state.dtype == np.float32
    again, same = agent.predict(0)
    assert again == first and np.array_equal(same, state)  # None is a fresh state each time
    _, later = agent.predict(0, state=state)
    assert not np.array_equal(later, state)  # the state moves on
    actions, states = agent.predict(np.array([0, 1, 2]), state=np.zeros((3, 16), np.float32))
    assert actions.shape == (3,) and states.shape == (3, 16)
    with pytest.raises(ValueError, match=r"state must be float32 \[3, 16\]") as err:
        agent.predict(np.array([0, 1, 2]), state=state)
    assert "\n" not in str(err.value)


def test_an_agent_without_memory_refuses_a_state(tmp_path):
    rlpipe.train("cartpole-dqn", tmp_path / "dqn", overrides=TINY_RUN)
    agent = rlpipe.load(tmp_path / "dqn")
    with pytest.raises(ValueError, match=r"state is for recurrent agents; policy\.type 'dqn' has no memory"):
        agent.predict(np.zeros(4, np.float32), state=np.zeros(4, np.float32))


def exported_steps(run, fmt, tmp_path, capsys, steps=12, n=5):
    """The exported graph and ``predict`` over ``steps`` steps of ``n`` envs from fresh states: their actions
    and states, and what ``rlpipe export`` printed."""
    out = tmp_path / f"policy.{fmt}"
    assert main(["export", str(run), "--format", fmt, "--out", str(out)]) == 0
    printed = json.loads(capsys.readouterr().out)
    agent = rlpipe.load(run)
    if fmt == "onnx":
        ort = pytest.importorskip("onnxruntime")
        session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
        graph = lambda obs, state: session.run(None, {"obs": obs, "state": state})  # noqa: E731
    else:
        module = torch.jit.load(str(out))
        graph = lambda obs, state: [x.numpy() for x in module(torch.from_numpy(obs), torch.from_numpy(state))]  # noqa: E731
    rng, state, graph_state = np.random.default_rng(0), None, np.zeros((n, 16), np.float32)
    pairs = []
    for _ in range(steps):
        obs = rng.integers(4, size=n)
        action, state = agent.predict(obs, state=state)
        graph_action, graph_state = graph(obs.astype(np.float32), graph_state)
        pairs.append((action, state, graph_action, graph_state))
    return pairs, printed


@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
def test_export_takes_and_returns_the_state_as_predict_does(run, fmt, tmp_path, capsys):
    pairs, printed = exported_steps(run, fmt, tmp_path, capsys)
    for action, state, graph_action, graph_state in pairs:
        np.testing.assert_array_equal(graph_action, action)
        np.testing.assert_allclose(graph_state, state, rtol=0, atol=1e-5)
    assert len(np.unique(np.concatenate([pair[0] for pair in pairs]))) > 1  # the steps tell actions apart
    assert not np.allclose(pairs[-1][1], pairs[0][1])  # the states moved on
    assert printed["input"] == "obs: float32 [N], state: float32 [N, 16]"
    assert printed["output"] == "action: int64 [N], next_state: float32 [N, 16]"


@pytest.mark.parametrize(("core", "state_bytes"), [("gru", 4 * 128), ("lstm", 2 * 4 * 128)])
def test_the_memory_check_counts_each_steps_recurrent_state(core, state_bytes):
    shapes = ["policy.model.obs_shape=8", "policy.model.action_shape=4", f"policy.model.core={core}"]
    plain = transition_nbytes(load_config("popgym-repeatprevious-dqn", shapes[:2]))[1]
    assert transition_nbytes(load_config("popgym-repeatprevious-r2d2", shapes))[1] == (
        plain + state_bytes + SEQUENCE_INDEX_BYTES)
