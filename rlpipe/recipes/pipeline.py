"""The training pipeline of ``rlpipe train``: the algorithm's middleware, in the order they run.

:func:`use_training_pipeline` is the one place that decides which middleware a config gets;
the examples spell the same lines out for reading, and a test checks they agree.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rlpipe.config import Config, ConfigError
from rlpipe.config.algorithms import ALGORITHMS, Exploration
from rlpipe.envs import VectorEnv
from rlpipe.framework import Task
from rlpipe.framework.middleware import (
    EpisodeCollector,
    HERLearner,
    OffPolicyLearner,
    StepCollector,
    data_pusher,
    eps_greedy_handler,
    fixed_eps,
    flush_at_finish,
    interaction_evaluator,
    lr_scheduler,
    nstep_reward_enhancer,
    reward_model_trainer,
    scheduled_learning_rates,
    termination_checker,
)
from rlpipe.policy import Policy
from rlpipe.recipes.build import Parts

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


class from_train_iter:  # noqa: N801 - middleware are named like functions
    """Run ``middleware`` once ``ctx.train_iter`` reaches ``start`` (offline-to-online: collection after the
    dataset-only pretraining); before that, it is skipped."""

    def __init__(self, start: int, middleware: Middleware) -> None:
        self.start, self.middleware = start, middleware

    def __call__(self, ctx: Any) -> Any:
        if ctx.train_iter >= self.start:
            return self.middleware(ctx)
        return None


class before_train_iter(from_train_iter):  # noqa: N801
    """Run ``middleware`` only while ``ctx.train_iter`` is below ``start`` (the dataset-only pretraining)."""

    def __call__(self, ctx: Any) -> Any:
        if ctx.train_iter < self.start:
            return self.middleware(ctx)
        return None


def use_collect_half(
    task: Task, cfg: Config, policy: Policy, env: VectorEnv, episodes: bool = False, max_env_step: int | None = None,
    eps: float | None = None,
) -> Task:
    """Add (explore) -> collect -> (n-step) to ``task``: the part of the pipeline that acts
    (role COLLECTOR), leaving the transitions in ``ctx.trajectories`` (one-step rows for a
    sequence policy, which computes n-step returns itself), or with ``episodes`` (HER) whole
    episodes in ``ctx.episodes``.

    An epsilon schedule for the algorithms that explore epsilon-greedily (dqn; the others sample
    their actions or add their own noise: the table in :mod:`rlpipe.config.algorithms`),
    a warm-up of ``policy.random_collect_size`` env steps before training (uniformly random
    actions unless ``policy.warm_up_actions`` is ``policy``). With
    ``max_env_step`` (a local run's ``run.max_env_step``) collection stops at that count, within
    one vector step; a remote collector counts only its share of the run, so it takes none.
    ``eps``: a fixed epsilon in place of the schedule (a collector's rung of Ape-X's ladder).
    """
    if ALGORITHMS[cfg.policy.type].exploration_of(cfg.policy) is Exploration.EPSILON:
        task.use(eps_greedy_handler(cfg) if eps is None else fixed_eps(eps))
    if episodes:
        return task.use(EpisodeCollector(cfg, policy.collect_mode, env, cfg.policy.random_collect_size, max_env_step))
    task.use(StepCollector(cfg, policy.collect_mode, env, cfg.policy.random_collect_size, max_env_step))
    if ALGORITHMS[cfg.policy.type].sequences:
        return task  # a sequence policy computes its n-step returns inside the sequences
    return task.use(nstep_reward_enhancer(cfg))


def use_training_pipeline(
    task: Task, parts: Parts, middleware: Mapping[str, Sequence[Middleware]] | None = None,
    collect: Middleware | None = None, flush: bool = False,
) -> Task:
    """Add (explore) -> collect -> (n-step) -> push -> learn -> evaluate -> stop to ``task``.

    An epsilon schedule for dqn (sac samples its actions, td3 and ddpg add their own noise);
    :class:`~rlpipe.framework.middleware.lr_scheduler` before the learner when a learning rate
    is a schedule.
    Transitions and ``OffPolicyLearner`` by default (with a learned reward model: its bonus
    mixed into each batch by the learner, and its own training after the learner); whole
    episodes and ``HERLearner`` when ``parts`` has a HER reward model. Saving, logging and
    progress are the caller's to add. ``middleware`` maps :data:`INSERTION_POINTS` to the
    caller's own middleware, added there in the order given. ``collect`` replaces the
    collect half (:func:`use_collect_half`) with a middleware that fills ``ctx.trajectories``
    and the counters itself: the Ray backend's receiver of remote collectors' fragments.
    ``flush``: at the end of the run, what the local collect half still holds goes to the
    buffer (:class:`~rlpipe.framework.middleware.flush_at_finish`), for a final save that holds
    every transition collected.

    With ``offline`` in the config the learner samples ``parts.dataset``: alone (offline only: no
    collect half, no pusher), or beside the online buffer in the seed's list form
    ``[(dataset, dataset_share), (online, 1 - dataset_share)]``, after ``offline.pretrain_iter``
    updates on the dataset alone during which nothing is collected.
    """
    cfg, policy, buffer = parts.cfg, parts.policy, parts.buffer
    extra = middleware or {}
    check_insertion_points(extra)

    def insert(point: str) -> None:
        for fn in extra.get(point, ()):
            task.use(fn)

    offline = cfg.offline
    collects = not cfg.offline_only
    pretrain_iter = offline.pretrain_iter if offline is not None else 0
    insert("before_collect")
    # offline-to-online with pretraining: the collect half is built apart, then added behind a gate that
    # holds it until the dataset alone has trained the policy
    collecting = Task() if pretrain_iter else task
    first = len(collecting.middleware)
    if collects:  # offline only: the dataset is all the learner sees
        if collect is None:
            use_collect_half(collecting, cfg, policy, parts.collector_env,
                             episodes=parts.her_reward_model is not None, max_env_step=cfg.run.max_env_step)
        else:
            collecting.use(collect)
        collecting.use(data_pusher(cfg, buffer))
    collect_half = collecting.middleware[first:]
    if pretrain_iter:
        for mw in collect_half:
            task.use(from_train_iter(pretrain_iter, mw))
    insert("after_collect")
    insert("before_learn")
    if scheduled_learning_rates(cfg):
        task.use(lr_scheduler(cfg, policy))
    if parts.her_reward_model is not None:
        task.use(HERLearner(cfg, policy.learn_mode, buffer, parts.her_reward_model))
    elif parts.dataset is not None and collects:
        assert offline is not None
        if pretrain_iter:
            task.use(before_train_iter(pretrain_iter, OffPolicyLearner(cfg, policy.learn_mode, parts.dataset,
                                                                       log_freq=cfg.run.log_freq)))
        sources = [(parts.dataset, offline.dataset_share), (buffer, 1.0 - offline.dataset_share)]
        learner = OffPolicyLearner(cfg, policy.learn_mode, sources, log_freq=cfg.run.log_freq)
        task.use(from_train_iter(pretrain_iter, learner) if pretrain_iter else learner)
    else:
        task.use(OffPolicyLearner(cfg, policy.learn_mode, buffer, parts.reward_model, log_freq=cfg.run.log_freq))
        if parts.reward_model is not None:
            task.use(reward_model_trainer(cfg, parts.reward_model, buffer))
    insert("after_learn")
    insert("before_evaluate")
    task.use(interaction_evaluator(cfg, policy.eval_mode, parts.evaluator_env, stop_on_solve=cfg.run.stop_on_solve))
    insert("after_evaluate")
    task.use(termination_checker(cfg.run.max_env_step, cfg.run.max_train_iter))
    if flush and collect is None and collects:
        task.use(flush_at_finish(collect_half))
    return task
