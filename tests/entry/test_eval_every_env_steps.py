"""``policy.eval.evaluator.eval_every_env_steps``: a run evaluates each time its env-step count
crosses a multiple, and a resumed run goes on with the same multiples."""
from __future__ import annotations

from rlpipe.cli.main import main
from rlpipe.utils.metrics import read_metrics
from tests.tiny_run import TINY_RUN

RUN = [*TINY_RUN, "run.max_env_step=400", "env.collector_env_num=4", "policy.learn.update_per_collect=4",
       "policy.eval.evaluator.eval_freq=null", "policy.eval.evaluator.eval_every_env_steps=120"]


def evaluated_at(run_dir):
    return [r["env_step"] for r in read_metrics(run_dir) if r["kind"] == "eval"]


def test_evaluations_follow_env_steps_across_a_resume(tmp_path):
    straight, split = tmp_path / "straight", tmp_path / "split"
    assert main(["train", "cartpole-dqn", *RUN, "--run-dir", str(straight)]) == 0
    assert evaluated_at(straight) == [40, 120, 240, 360]  # the first iteration, then each multiple of 120 crossed
    assert main(["train", "cartpole-dqn", *RUN, "run.max_train_iter=16", "--run-dir", str(split)]) == 0
    assert evaluated_at(split) == [40, 120]  # stopped at 160 env steps
    assert main(["resume", str(split), "run.max_train_iter=null", "run.progress=false"]) == 0
    assert evaluated_at(split) == evaluated_at(straight)  # no evaluation at the resume itself
