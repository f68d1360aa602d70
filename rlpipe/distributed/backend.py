"""The Ray backend of ``distributed.backend=ray``, as :mod:`rlpipe.recipes.backends` looks it up."""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rlpipe.config import Config
from rlpipe.distributed.cluster import ray_session
from rlpipe.distributed.ray_collectors import RayCollectors, fragment_receiver
from rlpipe.policy import Policy
from rlpipe.recipes.pipeline import Middleware


@contextmanager
def ray_collect_half(cfg: Config, policy: Policy) -> Iterator[Middleware]:
    """Collector actors on Ray, and the middleware that feeds their fragments to the learner
    (:func:`~rlpipe.distributed.ray_collectors.fragment_receiver`); the actors stop at the end."""
    with ray_session(cfg.distributed, cfg.distributed.collectors) as ray:
        collectors = RayCollectors(ray, cfg, policy)
        try:
            yield fragment_receiver(collectors, cfg.policy.random_collect_size)
        finally:
            collectors.close()
