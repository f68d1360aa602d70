"""R2D2 as a run: it trains from sequences, saves its sequence buffer with each checkpoint, resumes,
and its agent acts with the state it hands back."""
from __future__ import annotations

import numpy as np
import pytest

import rlpipe
from rlpipe.config import load_config
from rlpipe.framework.middleware.ckpt_handler import latest_checkpoint
from rlpipe.recipes.build import SEQUENCE_INDEX_BYTES, make_buffer, transition_nbytes
from tests.cli_errors import one_line_error
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


def test_export_refuses_a_recurrent_run_in_one_line(run, tmp_path, capsys):
    err = one_line_error(capsys, ["export", str(run), "--format", "torchscript", "--out", str(tmp_path / "p.pt")])
    assert "policy.type 'r2d2' acts from a recurrent state" in err and not (tmp_path / "p.pt").exists()


@pytest.mark.parametrize(("core", "state_bytes"), [("gru", 4 * 128), ("lstm", 2 * 4 * 128)])
def test_the_memory_check_counts_each_steps_recurrent_state(core, state_bytes):
    shapes = ["policy.model.obs_shape=8", "policy.model.action_shape=4", f"policy.model.core={core}"]
    plain = transition_nbytes(load_config("popgym-repeatprevious-dqn", shapes[:2]))[1]
    assert transition_nbytes(load_config("popgym-repeatprevious-r2d2", shapes))[1] == (
        plain + state_bytes + SEQUENCE_INDEX_BYTES)
