"""``rlpipe.train(hooks=[...])``: a hook sees the run's own policy, buffer and config after every
iteration, and returning False (or ``view.stop()``) stops the run as a stop signal does."""
from __future__ import annotations

import itertools
import json

import pytest
import torch

import rlpipe
from rlpipe.entry.options import ArgumentError
from rlpipe.entry.train import ResumePoint
from rlpipe.recipes.hooks import RunView
from tests.tiny_run import TINY_RUN

TINY = [*TINY_RUN, "exp_name=hooked"]  # 200 env steps, 40 per iteration: 5 iterations


def test_a_hook_sees_the_policy_the_learner_trains_the_buffer_and_the_config(tmp_path):
    seen: list[dict] = []

    def watch(view: RunView) -> None:
        seen.append({
            "model": view.policy.model,
            "params": torch.nn.utils.parameters_to_vector(view.policy.model.parameters()).detach().clone(),
            "count": view.buffer.count(), "env_step": view.env_step, "train_iter": view.train_iter,
            "exp_name": view.config.exp_name, "last_eval": view.last_eval_value, "ctx_step": view.ctx.env_step,
        })

    result = rlpipe.train("cartpole-dqn", overrides=TINY, run_dir=tmp_path / "run", hooks=[watch])
    assert len(seen) == result.summary.env_step // 40 == 5  # once per iteration
    assert all(s["model"] is seen[0]["model"] for s in seen)  # one policy object throughout
    assert all(not torch.equal(a["params"], b["params"]) for a, b in itertools.pairwise(seen))  # it learns
    counts = [s["count"] for s in seen]
    assert counts == sorted(counts) and counts[-1] > counts[0] > 0 and counts[-1] <= result.summary.env_step
    assert [s["env_step"] for s in seen] == [s["ctx_step"] for s in seen] == [40, 80, 120, 160, 200]
    assert seen[-1]["train_iter"] == result.summary.train_iter and {s["exp_name"] for s in seen} == {"hooked"}
    assert seen[0]["last_eval"] is not None  # the evaluator runs at the first iteration, before the hooks
    assert result.summary.stopped_by is None


def test_a_hook_returning_false_stops_the_run_with_a_final_checkpoint_that_resumes(tmp_path):
    calls: list[int] = []

    def stop_early(view: RunView) -> bool:
        calls.append(view.env_step)
        return view.env_step < 80

    run_dir = tmp_path / "run"
    result = rlpipe.train("cartpole-dqn", overrides=TINY, run_dir=run_dir, hooks=[stop_early])
    assert calls == [40, 80] and result.summary.env_step == 80
    assert result.summary.stopped_by == "hook stop_early"
    assert json.loads((run_dir / "summary.json").read_text())["stopped_by"] == "hook stop_early"
    assert (run_dir / "ckpt" / "final.pth.tar").is_file()
    point = ResumePoint.find(run_dir)
    assert point.checkpoint["counters"]["env_step"] == 80
    resumed = rlpipe.train("cartpole-dqn", overrides=TINY, run_dir=run_dir, resume=True)
    assert resumed.summary.env_step == 200 and resumed.summary.stopped_by is None
    assert resumed.summary.run_id == result.summary.run_id


def test_view_stop_stops_the_run_too(tmp_path):
    def stop_now(view: RunView) -> None:
        view.stop()

    result = rlpipe.train("cartpole-dqn", overrides=TINY, run_dir=tmp_path / "run", hooks=[stop_now])
    assert result.summary.env_step == 40 and result.summary.stopped_by == "hook stop_now"


@pytest.mark.parametrize("hooks, message", [
    ([print, 3], "hooks must be callables taking a RunView; 3 is not callable"),
    (print, "hooks must be a list of callables, got the single callable"),
])
def test_a_hook_that_cannot_be_called_is_one_line(tmp_path, hooks, message):
    with pytest.raises(ArgumentError, match=message) as error:
        rlpipe.train("cartpole-dqn", overrides=TINY, run_dir=tmp_path / "run", hooks=hooks)
    assert "\n" not in str(error.value) and not (tmp_path / "run").exists()
