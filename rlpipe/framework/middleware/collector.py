"""Collectors: step the vector environment with the collect policy and hand over the data.

Both read ``ctx.collect_kwargs`` (e.g. ``eps``) and increment ``ctx.env_step`` and
``ctx.env_episode``. Transitions stay columnar from the environment to the buffer. Failed
environment steps are resolved here, once: what the collectors write holds only real
transitions, and an episode cut by a failure ends, truncated, at its last good step.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from rlpipe.data.buffer.sequence_columns import CORE_STATE, INITIAL_TD
from rlpipe.data.failed_steps import FailedStepFilter
from rlpipe.envs.protocol import VectorEnv
from rlpipe.framework.context import OnlineRLContext
from rlpipe.framework.task import Role, role_gated
from rlpipe.utils.batch import Batch, batch_nbytes, concat_batches, end_episodes_at_failed_steps, num_rows

WARM_UP_CHUNK_BYTES = 256 * 2**20
"""Most bytes of transitions one warm-up collection of :class:`StepCollector` hands on (it stops
at the first vector step past it): a long random warm-up (Atari's 100k env steps of frame
stacks, 5.6 GB as ``obs`` and ``next_obs``) reaches the buffer in pieces, not all at once."""


def random_action_steps(cfg: Any, random_collect_size: int) -> int:
    """The env steps of the warm-up that act uniformly randomly: all ``random_collect_size`` of
    them, or none with ``policy.warm_up_actions: policy`` (the collect policy acts from the first
    step, as Dopamine's noisy-net agents do; the seed's configs have no such key)."""
    return 0 if getattr(cfg.policy, "warm_up_actions", "random") == "policy" else random_collect_size


class _Acting:
    """The policy's actions for the env's current observations, one vector step at a time.

    A policy with memory (a mode whose ``memory`` is set: recurrent agents) acts from each env's
    state: states are reset where an episode starts, the state each env acted from becomes the
    row's :data:`CORE_STATE`, and the policy runs in the random warm-up too, so that its states
    follow the episodes it will learn from. A mode that gives ``initial_td`` (see
    :class:`~rlpipe.policy.base.PolicyMode`) fills each row's :data:`INITIAL_TD`.
    """

    def __init__(self, policy: Any, env: VectorEnv, random_steps: int) -> None:
        self._policy, self._env, self._random_steps = policy, env, random_steps
        self._memory = getattr(policy, "memory", None)
        self._initial_td = getattr(policy, "initial_td", None)
        self._episode_start = np.ones(env.num_envs, dtype=bool)

    def step(self, ctx: OnlineRLContext) -> Batch:
        random = ctx.env_step < self._random_steps
        if self._memory is None:
            return self._env.step(self._env.random_actions() if random else
                                  self._policy.forward(self._env.obs, **ctx.collect_kwargs))
        self._memory.begin(self._episode_start)
        state = self._memory.stored()
        action = self._policy.forward(self._env.obs, **ctx.collect_kwargs)
        step = self._env.step(self._env.random_actions() if random else action)
        step[CORE_STATE] = state
        if self._initial_td is not None:
            step[INITIAL_TD] = self._initial_td(step)
        self._episode_start = step["terminated"] | step["truncated"]
        return step


FAILED_STEPS = "failed_steps"
"""Key of the env steps that failed so far in the collectors' episode figures (a count, not a mean)."""


def _episode_figures(env: VectorEnv) -> dict[str, float]:
    """The env's :meth:`EpisodeStats.summary` and ``failed_steps``, the env steps that failed so far."""
    return {**env.episode_stats.summary(), FAILED_STEPS: env.failed_steps}


def _count(ctx: OnlineRLContext, step: Batch) -> None:
    ctx.env_step += len(step["reward"])
    ctx.env_episode += int(np.count_nonzero(step["terminated"] | step["truncated"]))


@role_gated(Role.COLLECTOR)
class StepCollector:
    """Collect ``cfg.policy.collect.n_sample`` env steps (rounded up to whole vector steps).

    Writes ``ctx.collect_episode_stats`` (:func:`_episode_figures`) and
    ``ctx.trajectories``: one columnar batch, rows of one vector step contiguous and
    in time order, with ``env_id`` (None when there is nothing to hand on yet). The first
    ``random_collect_size`` env steps are a warm-up with uniformly random actions (or the
    policy's: :func:`random_action_steps`); a collection during them
    goes on to their end, or until it holds :data:`WARM_UP_CHUNK_BYTES` and then sets
    ``ctx.warming_up`` (the learners wait for the end). With ``max_env_step`` a collection stops
    at the first vector step that reaches it, so the run's env steps exceed the cap by less than
    one vector step. The newest vector step is held until the next one shows whether its env
    failed (:class:`FailedStepFilter`), so the rows written lag the env steps counted by one
    vector step.
    """

    def __init__(
        self, cfg: Any, policy: Any, env: VectorEnv, random_collect_size: int = 0, max_env_step: int | None = None
    ) -> None:
        self._env = env
        self._vector_steps = math.ceil(cfg.policy.collect.n_sample / env.num_envs)
        self._random_collect_size = random_collect_size
        self._acting = _Acting(policy, env, random_action_steps(cfg, random_collect_size))
        self._max_env_step = max_env_step
        self._clean = FailedStepFilter()

    def __call__(self, ctx: OnlineRLContext) -> None:
        vector_steps = self._vector_steps
        warm_up = ctx.env_step < self._random_collect_size
        if warm_up:
            vector_steps = max(vector_steps, self._vector_steps_to(self._random_collect_size, ctx))
        if self._max_env_step is not None:
            vector_steps = min(vector_steps, self._vector_steps_to(self._max_env_step, ctx))
        steps, held_bytes = [], 0
        for done in range(1, vector_steps + 1):
            step = self._acting.step(ctx)
            _count(ctx, step)
            ready = self._clean.add(step)
            if ready is not None:
                steps.append(ready)
            if warm_up:  # only a warm-up collection is sized in bytes: ordinary ones pay nothing for it
                held_bytes += batch_nbytes(ready) if ready is not None else 0
                if done >= self._vector_steps and held_bytes >= WARM_UP_CHUNK_BYTES:
                    break
        ctx.trajectories = concat_batches(steps) if steps else None
        ctx.collect_episode_stats = _episode_figures(self._env)
        ctx.warming_up = ctx.env_step < self._random_collect_size

    def release(self, ctx: OnlineRLContext) -> None:
        """At the end of a run: hand on the held vector step as ``ctx.trajectories`` (None when
        nothing is held), each row ending its episode, truncated (the run stops there; a resumed
        run starts fresh episodes). Nothing is held after."""
        ctx.trajectories = self._clean.release()

    def _vector_steps_to(self, env_step: int, ctx: OnlineRLContext) -> int:
        """The vector steps that take ``ctx.env_step`` to ``env_step`` or just past it (0 when there)."""
        return math.ceil(max(env_step - ctx.env_step, 0) / self._env.num_envs)


@role_gated(Role.COLLECTOR)
class EpisodeCollector:
    """Collect ``cfg.policy.collect.n_episode`` whole episodes into ``ctx.episodes``.

    Each episode is a columnar dict (leading dim = episode length) ending in a terminated or
    truncated step. Episodes still running when enough have finished continue in the next
    call, so no steps are thrown away. A failed step ends its episode (the env marks it
    truncated), so it is always the last row of the episode it cuts: it is dropped there and
    the step before becomes the end, when the whole episode is handed on. No step needs to be
    held back, unlike :class:`StepCollector`'s rows. With ``max_env_step`` a collection stops
    at the first vector step that reaches it, with the episodes finished by then.
    """

    def __init__(
        self, cfg: Any, policy: Any, env: VectorEnv, random_collect_size: int = 0, max_env_step: int | None = None
    ) -> None:
        self._env = env
        self._n_episode = cfg.policy.collect.n_episode
        if self._n_episode is None:
            raise ValueError("config key 'policy.collect.n_episode' must be set for an episode collector")
        self._random_collect_size = random_collect_size
        self._acting = _Acting(policy, env, random_action_steps(cfg, random_collect_size))
        self._max_env_step = max_env_step
        self._history: list[Batch] = []  # vector steps since the oldest running episode began
        self._start = np.zeros(env.num_envs, dtype=np.int64)  # history index where each episode began

    def __call__(self, ctx: OnlineRLContext) -> None:
        episodes: list[Batch] = []
        while (len(episodes) < self._n_episode or ctx.env_step < self._random_collect_size) and (
            self._max_env_step is None or ctx.env_step < self._max_env_step
        ):
            step = self._acting.step(ctx)
            _count(ctx, step)
            self._history.append(step)
            now = len(self._history) - 1
            for e in np.flatnonzero(step["terminated"] | step["truncated"]):
                rows = self._history[self._start[e] : now + 1]
                episode = end_episodes_at_failed_steps({key: np.stack([row[key][e] for row in rows]) for key in step})
                if num_rows(episode):  # empty when the env failed at the episode's first step
                    episodes.append(episode)
                self._start[e] = now + 1
            self._forget_finished_steps()
        ctx.episodes = episodes
        ctx.collect_episode_stats = _episode_figures(self._env)

    def release(self, ctx: OnlineRLContext) -> None:
        """At the end of a run: hand on each env's unfinished episode as ``ctx.episodes``, its last
        step truncated (the run stops there; a resumed run starts fresh episodes). A running
        episode holds no failed step (a failed step ends its episode), so no row is dropped."""
        episodes = []
        for e, start in enumerate(self._start.tolist()):
            rows = self._history[start:]
            if rows:
                steps = {key: np.stack([row[key][e] for row in rows]) for key in rows[0]}
                episode = end_episodes_at_failed_steps(steps)
                episode["truncated"][-1] = True
                episodes.append(episode)
        self._history.clear()
        self._start[:] = 0
        ctx.episodes = episodes

    def _forget_finished_steps(self) -> None:
        oldest = int(self._start.min())
        if oldest > 0:
            del self._history[:oldest]
            self._start -= oldest


class flush_at_finish:  # noqa: N801 - middleware are named like functions
    """At the end of a run (``ctx.finish``), the transitions the collect half still holds go to the
    buffer: the collector hands them on (``release``: :class:`StepCollector`'s held vector step,
    :class:`EpisodeCollector`'s unfinished episodes, each ending truncated), and the middleware
    after it in ``collect_half`` (n-step, the pusher) take them on as in any iteration. The
    released rows end their episodes, so n-step closes every window it holds and nothing stays
    behind. Put it after every middleware that may set ``ctx.finish``, before the checkpoint saver.

    ``collect_half``: the middleware from the collector (or one before it) to the pusher, in
    pipeline order; the ones before the collector (the explorer) are not run again.
    """

    def __init__(self, collect_half: Sequence[Callable[[Any], Any]]) -> None:
        at = next((i for i, fn in enumerate(collect_half) if isinstance(fn, (StepCollector, EpisodeCollector))), None)
        if at is None:
            raise ValueError("flush_at_finish needs a StepCollector or EpisodeCollector in collect_half")
        self._collector: StepCollector | EpisodeCollector = collect_half[at]  # type: ignore[assignment]
        self._then = list(collect_half[at + 1:])

    def __call__(self, ctx: OnlineRLContext) -> None:
        if not ctx.finish:
            return
        ctx.trajectories = ctx.episodes = None
        self._collector.release(ctx)
        for fn in self._then:
            fn(ctx)
