"""Guardrails against silent mistakes, each with its exact one-line message."""
from __future__ import annotations

import logging
import math

import pytest
import torch

from rlpipe.config import ConfigError, load_config
from rlpipe.framework import OnlineRLContext, Task
from rlpipe.framework.middleware import OffPolicyLearner, StepCollector
from rlpipe.framework.middleware.learner import IDLE_ITERATIONS_WARNING
from rlpipe.recipes.build import build_parts

SMALL = ["env.collector_env_num=2", "env.evaluator_env_num=1", "policy.collect.n_sample=2",
         "policy.learn.batch_size=4"]


def test_a_learner_whose_buffer_gets_nothing_warns_once(caplog):
    with build_parts(load_config("cartpole-dqn", SMALL)) as parts:
        task = Task()
        with task.start(ctx=OnlineRLContext()), caplog.at_level(logging.WARNING):
            task.use(StepCollector(parts.cfg, parts.policy.collect_mode, parts.collector_env))
            task.use(OffPolicyLearner(parts.cfg, parts.policy.learn_mode, parts.buffer))  # no data_pusher
            task.run(max_step=2 * IDLE_ITERATIONS_WARNING)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        f"OffPolicyLearner has trained nothing for {IDLE_ITERATIONS_WARNING} iterations while "
        f"{2 * (IDLE_ITERATIONS_WARNING - 1)} env steps were collected: no data reaches its buffer "
        "(is data_pusher in the pipeline?)"
    ]


def test_cuda_without_a_gpu_is_an_error(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # as on this CPU machine, wherever it runs
    with pytest.raises(ConfigError) as err:
        build_parts(load_config("cartpole-dqn", [*SMALL, "policy.cuda=true"]))
    assert str(err.value) == (f"config key 'policy.cuda' is true but torch {torch.__version__} sees no CUDA device; "
                              "set policy.cuda=false")


def test_her_on_an_env_without_goals_is_an_error():
    with pytest.raises(ConfigError) as err:
        build_parts(load_config("bitflip-her-dqn", ["env.env_id=CartPole-v1", "env.env_kwargs={}"]))
    assert str(err.value) == (
        "policy.other.her needs a goal env; env 'CartPole-v1' has no compute_reward(achieved_goal, desired_goal, "
        "info) (a dict-observation goal env, or a flat one like rlpipe/BitFlip-v0)")


def test_a_non_finite_evaluation_never_counts_as_best_or_solved():
    from rlpipe.entry.summary import RunSummary

    summary = RunSummary()
    summary.merge_evaluations([{"kind": "eval", "env_step": 10, "return_mean": float("inf")},
                               {"kind": "eval", "env_step": 20, "return_mean": 3.0}], stop_value=5.0)
    assert (summary.best_eval_return, summary.solved) == (3.0, False)
    summary.merge_evaluations([{"kind": "eval", "env_step": 30, "return_mean": float("nan")}], stop_value=5.0)
    assert summary.best_eval_return == 3.0 and math.isnan(summary.last_eval_return)
