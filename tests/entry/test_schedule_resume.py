"""A run with a learning-rate and an epsilon schedule, stopped halfway and resumed, follows the
same schedules as the run left alone: the position (the env step) and the learning rate come
back from the checkpoint."""
from __future__ import annotations

from rlpipe.cli.main import main
from rlpipe.config.schedule import parse_schedule
from rlpipe.utils.checkpoint import load_checkpoint
from rlpipe.utils.metrics import read_metrics
from tests.tiny_run import TINY_RUN

LR, EPS = "linear(1e-3, 1e-5)", "linear(1.0, 0.1)"  # no decay: both span run.max_env_step
RUN = [*TINY_RUN, "run.max_env_step=400", "run.log_freq=1", "env.collector_env_num=4",
       "policy.learn.update_per_collect=4", f"policy.learn.learning_rate={LR}", f"policy.other.eps={EPS}"]


def trajectory(run_dir):
    return [(r["env_step"], r["train_iter"], r["cur_lr"], r["eps"])
            for r in read_metrics(run_dir) if r["kind"] == "train"]


def test_resume_continues_the_schedules_exactly(tmp_path):
    straight, split = tmp_path / "straight", tmp_path / "split"
    assert main(["train", "cartpole-dqn", *RUN, "--run-dir", str(straight)]) == 0
    whole = trajectory(straight)
    halfway = next(train_iter for env_step, train_iter, _, _ in whole if env_step >= 200)
    assert main(["train", "cartpole-dqn", *RUN, f"run.max_train_iter={halfway}", "--run-dir", str(split)]) == 0
    first = trajectory(split)
    assert first and first[-1][1] == halfway
    stopped = load_checkpoint(split / "ckpt" / "final.pth.tar")
    assert stopped["policy"]["optimizer"]["param_groups"][0]["lr"] == first[-1][2]  # checkpointed with the optimizer
    assert main(["resume", str(split), "run.max_train_iter=null", "run.progress=false"]) == 0

    assert trajectory(split) == whole
    lr, eps = parse_schedule(LR), parse_schedule(EPS)
    # each is the value at the env step where it is used: epsilon's where the record's collection
    # began (40 env steps before the record's), the learning rate's after it, where the updates are
    assert all(cur_lr == lr.value(env_step, 400) and epsilon == eps.value(env_step - 40, 400)
               for env_step, _, cur_lr, epsilon in whole)
    assert whole[-1][0] == 400 and whole[-1][2] == 1e-5 and whole[0][2] > 9e-4  # the whole decay, over the budget
