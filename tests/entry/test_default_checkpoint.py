"""A run stands for its best evaluation's checkpoint only when that evaluation came after training
began; else for its final checkpoint; ``rlpipe.load``, ``rlpipe eval`` and ``TrainResult.agent`` say which."""
from __future__ import annotations

import json
import logging

import rlpipe
from rlpipe.cli.main import main
from rlpipe.entry.evaluate import default_checkpoint
from rlpipe.utils.metrics import read_metrics
from tests.tiny_run import TINY_RUN

ONLY_AT_START = [*TINY_RUN, "policy.eval.evaluator.eval_freq=100000"]
"""The one evaluation comes as learning begins (after the first iteration's updates), as with the
MinAtar benchmark's runs, whose untrained network ``rlpipe.load`` used to hand back."""


def test_the_evaluation_as_learning_began_never_stands_for_the_run(tmp_path, caplog, capsys):
    result = rlpipe.train("cartpole-dqn", tmp_path / "run", overrides=ONLY_AT_START)
    assert (tmp_path / "run" / "ckpt" / "eval.pth.tar").is_file() and result.train_iter > 0
    chosen = default_checkpoint(tmp_path / "run")
    assert chosen.path.name == "final.pth.tar" and "was the first, taken as learning began" in chosen.reason
    with caplog.at_level(logging.INFO, logger="rlpipe.entry.agent"):
        agent = result.agent()
    assert agent.checkpoint == chosen and "was the first, taken as learning began" in caplog.text
    assert main(["eval", str(tmp_path / "run"), "--episodes", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["checkpoint"].endswith("final.pth.tar")


def test_a_best_evaluation_after_training_began_stands_for_the_run(tmp_path):
    # 1,500 env steps of learning: CartPole's first evaluation (about 10) is soon beaten
    rlpipe.train("cartpole-dqn", tmp_path / "run", overrides=[*TINY_RUN, "run.max_env_step=1500"])
    returns = [r["return_mean"] for r in read_metrics(tmp_path / "run") if r["kind"] == "eval"]
    assert max(returns) > returns[0], returns
    chosen = default_checkpoint(tmp_path / "run")
    assert chosen.path.name == "eval.pth.tar" and chosen.reason.startswith("the best evaluation's (")
    assert rlpipe.load(tmp_path / "run").checkpoint == chosen
    assert rlpipe.load(tmp_path / "run" / "ckpt" / "final.pth.tar").checkpoint.reason == "the checkpoint file given"
