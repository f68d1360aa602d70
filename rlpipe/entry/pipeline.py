"""The training pipeline of ``rlpipe train``: the algorithm's middleware, in the order they run.

:func:`use_training_pipeline` is the one place that decides which middleware a config gets;
the examples spell the same lines out for reading, and a test checks they agree.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rlpipe.config import ConfigError
from rlpipe.entry.build import Parts
from rlpipe.framework import Task
from rlpipe.framework.middleware import (
    EpisodeCollector,
    HERLearner,
    OffPolicyLearner,
    StepCollector,
    data_pusher,
    eps_greedy_handler,
    interaction_evaluator,
    nstep_reward_enhancer,
    reward_model_trainer,
    termination_checker,
)

INSERTION_POINTS = ("before_collect", "after_collect", "before_learn", "after_learn", "before_evaluate",
                    "after_evaluate")
"""Where :func:`use_training_pipeline` puts a caller's own middleware (``rlpipe.train(middleware=...)``):
collect is the explorer and the collector (with n-step and the pusher), learn the learner (with a
reward model's trainer), evaluate the evaluator."""
Middleware = Callable[[Any], Any]


def check_insertion_points(middleware: Mapping[str, Sequence[Middleware]]) -> None:
    """One line naming an unknown insertion point."""
    unknown = sorted(set(middleware) - set(INSERTION_POINTS))
    if unknown:
        raise ConfigError(f"unknown middleware insertion point '{unknown[0]}' (use {', '.join(INSERTION_POINTS)})")


def use_training_pipeline(
    task: Task, parts: Parts, middleware: Mapping[str, Sequence[Middleware]] | None = None
) -> Task:
    """Add (explore) -> collect -> (n-step) -> push -> learn -> evaluate -> stop to ``task``.

    An epsilon schedule for dqn (sac samples its actions, td3 and ddpg add their own noise).
    Transitions and ``OffPolicyLearner`` by default (with a learned reward model: its bonus
    mixed into each batch by the learner, and its own training after the learner); whole
    episodes and ``HERLearner`` when ``parts`` has a HER reward model. Saving, logging and
    progress are the caller's to add. ``middleware`` maps :data:`INSERTION_POINTS` to the
    caller's own middleware, added there in the order given.
    """
    cfg, policy, buffer = parts.cfg, parts.policy, parts.buffer
    extra = middleware or {}
    check_insertion_points(extra)

    def insert(point: str) -> None:
        for fn in extra.get(point, ()):
            task.use(fn)

    random_steps = cfg.policy.random_collect_size
    insert("before_collect")
    if cfg.policy.type == "dqn":
        task.use(eps_greedy_handler(cfg))
    if parts.her_reward_model is None:
        task.use(StepCollector(cfg, policy.collect_mode, parts.collector_env, random_steps))
        task.use(nstep_reward_enhancer(cfg))
        task.use(data_pusher(cfg, buffer))
        insert("after_collect")
        insert("before_learn")
        task.use(OffPolicyLearner(cfg, policy.learn_mode, buffer, parts.reward_model, log_freq=cfg.run.log_freq))
        if parts.reward_model is not None:
            task.use(reward_model_trainer(cfg, parts.reward_model, buffer))
    else:
        task.use(EpisodeCollector(cfg, policy.collect_mode, parts.collector_env, random_steps))
        task.use(data_pusher(cfg, buffer))
        insert("after_collect")
        insert("before_learn")
        task.use(HERLearner(cfg, policy.learn_mode, buffer, parts.her_reward_model))
    insert("after_learn")
    insert("before_evaluate")
    task.use(interaction_evaluator(cfg, policy.eval_mode, parts.evaluator_env, stop_on_solve=cfg.run.stop_on_solve))
    insert("after_evaluate")
    task.use(termination_checker(cfg.run.max_env_step, cfg.run.max_train_iter))
    return task
