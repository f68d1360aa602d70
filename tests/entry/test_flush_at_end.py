"""When a run finishes or stops, what the collect half still holds (the collector's newest vector
step, n-step's open windows, HER's unfinished episodes) goes to the buffer before the final save:
the saved buffer holds every transition collected, one per env step."""
from __future__ import annotations

import os
import signal

import numpy as np
import pytest

from rlpipe.config import load_config
from rlpipe.data import DequeBuffer
from rlpipe.entry import train
from tests.run_checks import saved_buffer
from tests.tiny_run import TINY_RUN

STOPS = {
    "max_env_step": [],
    "stop_value": ["env.stop_value=5", "run.stop_on_solve=true", "run.max_env_step=100000"],
    "signal": ["run.max_env_step=100000"],
}


def _sigterm_after(collections: int):
    """Middleware sending this process SIGTERM at its ``collections``-th call (a graceful stop)."""
    calls = []

    def send(ctx) -> None:
        calls.append(ctx.env_step)
        if len(calls) == collections:
            os.kill(os.getpid(), signal.SIGTERM)

    return send


def _saved(run_dir, preset: str, overrides: list[str]) -> DequeBuffer:
    cfg = load_config(preset, overrides)
    buffer = DequeBuffer(size=cfg.policy.other.replay_buffer.replay_buffer_size)
    buffer.load_data(str(saved_buffer(run_dir / "ckpt" / "final.pth.tar")))
    return buffer


@pytest.mark.parametrize("stop", sorted(STOPS))
def test_a_stopped_run_holds_every_transition_collected(tmp_path, stop):
    overrides = [*TINY_RUN, "policy.collect.n_sample=20", "run.save_freq=100000", *STOPS[stop]]  # 3-step, 8 envs
    middleware = {"after_collect": [_sigterm_after(4)]} if stop == "signal" else None
    summary = train("cartpole-dqn", tmp_path / "run", overrides=overrides, middleware=middleware)
    assert summary.stopped_by == ("SIGTERM" if stop == "signal" else None)
    assert summary.solved == (stop == "stop_value")
    buffer = _saved(tmp_path / "run", "cartpole-dqn", overrides)
    assert buffer.count() == summary.env_step  # nothing held back by the collector or n-step
    assert summary.env_step % 8 == 0 and summary.env_step < 100000
    newest = [buffer.get(-1 - i).data for i in range(8)]  # the held vector step, handed on last
    assert all(bool(row["terminated"]) or bool(row["truncated"]) for row in newest)  # its episodes end there


def test_a_stopped_her_run_holds_every_step_of_its_unfinished_episodes(tmp_path):
    overrides = [*TINY_RUN, "run.save_freq=100000", "run.max_env_step=150"]
    summary = train("bitflip-her-dqn", tmp_path / "run", overrides=overrides)
    buffer = _saved(tmp_path / "run", "bitflip-her-dqn", overrides)
    episodes = [buffer.get(i).data for i in range(buffer.count())]
    assert sum(len(episode["reward"]) for episode in episodes) == summary.env_step
    ends = np.array([bool(e["terminated"][-1] or e["truncated"][-1]) for e in episodes])
    assert ends.all()  # unfinished episodes end, truncated, where the run stopped
