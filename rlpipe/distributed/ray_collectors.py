"""Collector actors on Ray feeding one learner (Ape-X style): requests, weights, fragments, restarts.

The learner process keeps every collector busy with up to ``distributed.max_in_flight``
outstanding requests; each request returns one :class:`Fragment` through Ray's object store.
:func:`fragment_receiver` takes the place of the collect half in the learner's pipeline: it
takes the oldest fragment that has arrived (waiting only when none has: it never waits for
the slowest collector), then, after the learner has trained, tops the requests up again.
Each collector acts with weights at most about ``distributed.sync_every`` of its own env steps
old, as in Ape-X: the learner broadcasts its acting weights (one ``ray.put`` for all) each time
the collectors together have delivered ``sync_every x collectors`` env steps, and each collector
takes the newest broadcast with its next request.
"""
from __future__ import annotations

import os
import statistics
import time
from collections import deque
from collections.abc import Callable, Generator, Mapping
from types import ModuleType
from typing import Any

from rlpipe.config import Config
from rlpipe.distributed.collector_half import CollectorHalf
from rlpipe.distributed.fragment import Fragment, merge_episode_figures
from rlpipe.distributed.weights import to_numpy, to_torch
from rlpipe.errors import RlpipeError, first_line
from rlpipe.framework.context import OnlineRLContext

STATS_WINDOW = 100
"""Fragments the staleness median and the fragment rate are taken over."""
PING_INTERVAL_S = 0.2
"""How often a restarting collector is asked whether it is back."""


class CollectorLostError(RlpipeError, RuntimeError):
    """A collector's process died more often than ``distributed.max_restarts`` allows."""


class CollectorActor:
    """The body of each collector actor: a :class:`CollectorHalf` built from the config's JSON form."""

    def __init__(self, config: Mapping[str, Any], index: int) -> None:
        self._half = CollectorHalf(Config.model_validate(config), index)

    def collect(self, learner_env_step: int, version: int, weights: Mapping[str, Any] | None) -> Fragment:
        """One fragment (see :meth:`CollectorHalf.collect`); ``weights`` (Ray resolves the reference
        the learner passes; numpy, see :mod:`~rlpipe.distributed.weights`) is None when this
        collector's are still current."""
        return self._half.collect(learner_env_step, None if weights is None else (version, to_torch(weights)))

    def pid(self) -> int:
        """The id of this actor's process: the learner's "are you back?" to a restarting collector
        (and what the tests kill)."""
        return os.getpid()


class RayCollectors:
    """``distributed.collectors`` collector actors and the learner's side of talking to them.

    ``policy`` is the learner's: its ``acting_state_dict()`` is what collectors act with.
    ``body``: the actors' class, :class:`CollectorActor` or one with the same methods (the
    datapath benchmark's collectors hand over a ready-made fragment). Counters of the
    learner's record: ``restarts`` per collector; :meth:`stats` gives the figures the logger
    writes.
    """

    def __init__(self, ray: ModuleType, cfg: Config, policy: Any, body: type = CollectorActor) -> None:
        dist = cfg.distributed
        self._ray = ray
        self._policy = policy
        self._broadcast_every = dist.sync_every * dist.collectors  # delivered env steps between broadcasts
        self._max_in_flight = dist.max_in_flight
        self._max_restarts = dist.max_restarts
        actor_class = ray.remote(body).options(
            num_cpus=1, max_restarts=dist.max_restarts, max_task_retries=0
        )
        config = cfg.model_dump(mode="json")
        self.actors = [actor_class.remote(config, i) for i in range(dist.collectors)]
        n = len(self.actors)
        self._in_flight: dict[Any, tuple[int, int]] = {}  # request -> (collector, its restarts then), oldest first
        self._ready: deque[Any] = deque()  # requests known to have arrived, oldest first (one ray.wait finds many)
        self._outstanding = [0] * n
        self._restarting = [False] * n  # died, and not answering yet
        self._pings: dict[Any, int] = {}  # "are you back?" calls to restarting collectors -> collector
        self._next_ping = [0.0] * n  # monotonic time before which restarting collector i is not asked again
        self._has_version: list[int | None] = [None] * n  # the broadcast each collector acts with
        self._weights: tuple[int, Any] | None = None  # (version, object ref) of the newest broadcast
        self._steps_since_broadcast = 0
        self._latest = (0, 0)  # the learner's (env_step, train_iter) at the last request
        self.restarts = [0] * n
        """Times each collector's process died (Ray restarted it, up to ``distributed.max_restarts``)."""
        self._staleness: deque[int] = deque(maxlen=STATS_WINDOW)
        self._arrivals: deque[float] = deque(maxlen=STATS_WINDOW)

    def request(self, env_step: int, train_iter: int) -> None:
        """Give every collector up to ``max_in_flight`` outstanding requests; one that does not
        act with the newest broadcast yet (see :meth:`_newest_weights`) gets it with its next.
        A restarting collector gets none: it is asked whether it is back (:meth:`_ping`)."""
        self._latest = (env_step, train_iter)
        for i, actor in enumerate(self.actors):
            if self._restarting[i]:
                self._ping(i)
                continue
            while self._outstanding[i] < self._max_in_flight:
                version, ref = self._newest_weights(train_iter)
                weights = None if self._has_version[i] == version else ref
                self._has_version[i] = version
                self._in_flight[actor.collect.remote(env_step, version, weights)] = (i, self.restarts[i])
                self._outstanding[i] += 1

    def _newest_weights(self, train_iter: int) -> tuple[int, Any]:
        """The newest broadcast: ``(version, object ref)`` of the learner's acting weights. A new one
        (version ``train_iter``, one ``ray.put`` for every collector; each put costs the learner
        about 1 ms here whatever its size) once the collectors have delivered ``sync_every`` env
        steps each, on average, since the last."""
        if self._weights is None or (self._steps_since_broadcast >= self._broadcast_every
                                     and self._weights[0] != train_iter):
            self._weights = (train_iter, self._ray.put(to_numpy(self._policy.acting_state_dict())))
            self._steps_since_broadcast = 0
        return self._weights

    def receive(self, train_iter: int) -> Fragment:
        """The oldest fragment that has arrived, waiting for the first one when none has.

        A collector whose process died is restarted by Ray; training goes on with the others
        meanwhile, and once it answers again it gets requests, the first with the current weights.
        """
        ray = self._ray
        while True:
            if not self._ready:
                self._ready.extend(self._arrived())
            ref = self._ready.popleft()
            i, life = self._in_flight.pop(ref)
            self._outstanding[i] -= 1
            try:
                fragment: Fragment = ray.get(ref)
            except ray.exceptions.RayActorError as err:
                if life == self.restarts[i]:  # one death fails every request of that process: count it once
                    self._lost(i, err)
                continue
            except ray.exceptions.RayTaskError as err:  # the collector's own error, without Ray's wrapping
                raise (err.cause if isinstance(err.cause, BaseException) else err) from None
            self._steps_since_broadcast += fragment.env_steps
            self._staleness.append(train_iter - fragment.policy_version)
            self._arrivals.append(time.perf_counter())
            return fragment

    def _lost(self, i: int, err: Exception) -> None:
        """Collector ``i``'s process died: count it; it gets no requests until it answers again."""
        self.restarts[i] += 1
        self._restarting[i] = True
        self._has_version[i] = None
        if 0 <= self._max_restarts < self.restarts[i]:
            raise CollectorLostError(
                f"collector {i} died {self.restarts[i]} times, more than distributed.max_restarts="
                f"{self._max_restarts} allows (last: {first_line(err)})"
            )
        self._ping(i)

    def _ping(self, i: int) -> None:
        """Ask restarting collector ``i`` whether it is back: one call at a time, the next
        :data:`PING_INTERVAL_S` after the last came back unanswered.

        Polling, because a request Ray retries on a restarting actor waits out Ray's growing
        back-off (3.5-6 s after a kill on an idle machine here, 12-27 s on a loaded one, where
        the new process was ready after 1.5-3 s). A call made while the actor restarts fails
        about 1.8 s later; overlapping calls made the wait longer, not shorter (7.5 s became
        19.6 s on the same loaded machine).
        """
        if i not in self._pings.values() and time.monotonic() >= self._next_ping[i]:
            self._pings[self.actors[i].pid.remote()] = i

    def _answered_pings(self) -> None:
        """Collectors whose ping came back are back (and get requests); others are asked again later."""
        ray = self._ray
        ready, _ = ray.wait(list(self._pings), num_returns=len(self._pings), timeout=0)
        for ref in ready:
            i = self._pings.pop(ref)
            try:
                ray.get(ref)
            except ray.exceptions.ActorUnavailableError:  # still restarting: ask again a little later
                self._next_ping[i] = time.monotonic() + PING_INTERVAL_S
                continue
            except ray.exceptions.RayActorError as err:  # dead for good: Ray will not restart it
                raise CollectorLostError(f"collector {i} cannot be restarted ({first_line(err)})") from None
            self._restarting[i] = False
        self.request(*self._latest)

    def _arrived(self) -> list[Any]:
        """Requests whose fragment (or failure) has arrived, oldest first; waits for at least one,
        answering pings of restarting collectors meanwhile."""
        ray = self._ray
        while True:
            if self._pings or any(self._restarting):
                self._answered_pings()
            refs = list(self._in_flight)
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
            if ready:
                return ready
            waiting = refs + list(self._pings)
            if waiting:
                ray.wait(waiting, num_returns=1, timeout=PING_INTERVAL_S if any(self._restarting) else None)
            else:  # every collector is restarting, between two pings
                time.sleep(PING_INTERVAL_S)

    def queue_depth(self) -> int:
        """Fragments that have arrived and wait for the learner (as of the last look)."""
        return len(self._ready)

    def stats(self) -> dict[str, float]:
        """Median staleness (learner train iterations behind) and fragments/s over the last
        :data:`STATS_WINDOW` fragments, the queue depth and the collector restarts so far."""
        figures: dict[str, float] = {"queue_depth": self.queue_depth(), "collector_restarts": sum(self.restarts)}
        if self._staleness:
            figures["staleness_median"] = float(statistics.median(self._staleness))
        if len(self._arrivals) > 1:
            span = self._arrivals[-1] - self._arrivals[0]
            figures["fragments_per_s"] = (len(self._arrivals) - 1) / max(span, 1e-9)
        return figures

    def close(self) -> None:
        """Stop every collector actor."""
        for actor in self.actors:
            self._ray.kill(actor)
        self._in_flight.clear()
        self._ready.clear()
        self._pings.clear()


def fragment_receiver(
    collectors: RayCollectors, random_collect_size: int = 0
) -> Callable[[OnlineRLContext], Generator[None, None, None]]:
    """Middleware in the collect half's place on the learner: one fragment per iteration into
    ``ctx.trajectories`` (so the replay ratio is the local run's; stacks of frames rebuilt
    when the collector sent each frame once), its env steps and episodes
    counted, the training-episode figures of all collectors (:func:`merge_episode_figures`) and
    the fragment's epsilon for the logs, and
    ``ctx.distributed_stats``; ``ctx.warming_up`` until the run has ``random_collect_size`` env
    steps (the collectors send a long random warm-up in pieces). After the iteration's learning
    (its code after ``yield``), the collectors get new requests, and the weights just learned when
    they are due."""

    latest_figures: dict[int, dict[str, float]] = {}  # each collector's newest episode figures

    def _receive(ctx: OnlineRLContext) -> Generator[None, None, None]:
        collectors.request(ctx.env_step, ctx.train_iter)
        fragment = collectors.receive(ctx.train_iter)
        ctx.trajectories = fragment.stacked_transitions()
        ctx.env_step += fragment.env_steps
        ctx.env_episode += fragment.env_episodes
        ctx.warming_up = ctx.env_step < random_collect_size
        latest_figures[fragment.collector] = fragment.episode_stats
        ctx.collect_episode_stats = merge_episode_figures(latest_figures.values())
        if fragment.eps is not None:
            ctx.collect_kwargs["eps"] = fragment.eps
        ctx.distributed_stats = collectors.stats()
        yield
        if not ctx.finish:
            collectors.request(ctx.env_step, ctx.train_iter)

    return _receive
