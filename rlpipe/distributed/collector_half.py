"""The collect half of the training pipeline as a unit of its own: what each remote collector runs.

A :class:`CollectorHalf` owns its vector environments, a copy of the policy that only acts,
and a :class:`~rlpipe.framework.Task` with the role COLLECTOR running exactly the middleware
:func:`~rlpipe.recipes.pipeline.use_collect_half` adds in a local run (explore, collect,
n-step). Each :meth:`CollectorHalf.collect` is one iteration of that task, handed back as a
:class:`Fragment`. Nothing here knows about Ray: the Ray actor is a thin shell around it.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlpipe.config import Config
from rlpipe.distributed.fragment import Fragment, pack_frames
from rlpipe.framework import OnlineRLContext, Role, Task
from rlpipe.framework.middleware import epsilon_ladder
from rlpipe.recipes.build import make_policy, prepare_torch, uses_frame_store
from rlpipe.recipes.envs import make_vector_env
from rlpipe.recipes.pipeline import use_collect_half

COLLECTOR_SEED_STRIDE = 100_000
"""Collector ``i`` seeds its envs and exploration with ``seed + i * COLLECTOR_SEED_STRIDE``:
collector 0 acts as a local run would, the others on streams of their own (the evaluator's
envs use ``seed + 10,000``, see :mod:`rlpipe.recipes.envs`)."""


class CollectorHalf:
    """Explore, collect and n-step for one collector of a run, as ``cfg`` describes them.

    Its envs' ids in the fragments are the run's: collector ``i``'s env ``e`` is
    ``i * env.collector_env_num + e`` (the learner's buffer keeps each env's episodes apart, as
    sequences need). With ``distributed.epsilon_ladder`` it explores with its own fixed epsilon
    (:func:`~rlpipe.framework.middleware.functional.explorer.epsilon_ladder`).

    ``cfg`` is the learner's config with the model sizes filled in. The policy is built as
    the learner's is, but it never learns: it takes the learner's acting weights
    (``acting_state_dict``) when :meth:`collect` is given them. Where the learner keeps frames
    once (:func:`~rlpipe.recipes.build.uses_frame_store`), fragments carry each frame once
    (:func:`~rlpipe.distributed.fragment.pack_frames`).
    """

    def __init__(self, cfg: Config, index: int) -> None:
        self.index = index
        self._seed = cfg.seed + index * COLLECTOR_SEED_STRIDE
        prepare_torch(self._seed, 1, cfg.run.flush_denormal)  # one core per collector; the learner has its own
        self._env = make_vector_env(cfg, cfg.env.collector_env_num, self._seed, train=True)
        self._pack_frames = uses_frame_store(cfg)
        self._policy = make_policy(cfg.model_copy(update={"seed": self._seed}))
        self._task = Task().add_role(Role.COLLECTOR)
        eps = epsilon_ladder(index, cfg.distributed.collectors) if cfg.distributed.epsilon_ladder else None
        use_collect_half(self._task, cfg, self._policy, self._env, eps=eps)
        self._env_id_offset = index * cfg.env.collector_env_num
        self._task.use(self._hand_over)
        self._version = 0
        self._sequence = 0
        self._fragment: Fragment | None = None
        self._started = False
        self._before = (0, 0)  # the context's env_step and env_episode when the current collection began

    def collect(self, learner_env_step: int, weights: tuple[int, Mapping[str, Any]] | None = None) -> Fragment:
        """Collect one fragment, first taking ``weights`` (``(policy version, acting state)``) if given.

        ``learner_env_step`` is the run's env step count as the learner knows it: exploration
        schedules and ``random_collect_size`` follow the run's count, not this collector's
        share of it. A collector that starts in a run already under way (a resumed run, or
        a restart after its process died) begins with fresh episodes seeded by that count,
        as a resumed local run does.
        """
        if weights is not None:
            self._version, state = weights
            self._policy.load_acting_state_dict(state)
        if not self._started and learner_env_step > 0:
            self._env.reset(seed=self._seed + learner_env_step)
        self._started = True
        ctx = self._task.ctx
        assert isinstance(ctx, OnlineRLContext)
        ctx.env_step = max(ctx.env_step, learner_env_step)
        self._before = (ctx.env_step, ctx.env_episode)
        self._task.run_iteration()
        fragment, self._fragment = self._fragment, None
        assert fragment is not None
        return fragment

    def _hand_over(self, ctx: OnlineRLContext) -> None:
        """The last middleware: turn this iteration's transitions and counts into the fragment."""
        env_step, env_episode = self._before
        transitions, frames = ctx.trajectories, None
        if transitions is not None:  # the run's env ids: each collector's envs apart from the others'
            transitions = {**transitions, "env_id": transitions["env_id"] + self._env_id_offset}
        if self._pack_frames and transitions is not None:
            transitions, frames = pack_frames(transitions)
        self._fragment = Fragment(
            collector=self.index,
            sequence=self._sequence,
            policy_version=self._version,
            env_steps=ctx.env_step - env_step,
            env_episodes=ctx.env_episode - env_episode,
            transitions=transitions,
            episode_stats=dict(ctx.collect_episode_stats or {}),
            eps=ctx.collect_kwargs.get("eps"),
            frames=frames,
        )
        self._sequence += 1

    def close(self) -> None:
        """Close the environments."""
        self._env.close()
