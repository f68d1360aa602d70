"""Where the collect half of a run runs: the table of remote backends (``distributed.backend``).

With ``local`` the collect half runs in the learner's process (:func:`~rlpipe.recipes.pipeline.use_collect_half`).
A remote backend is a :data:`RemoteCollect`: a context manager that starts collectors elsewhere
for the learner's config and policy, yields the middleware that takes the collect half's place
in the learner's pipeline, and stops them at the end. :data:`REMOTE_BACKENDS` names each
backend's implementation by its import path, so that nothing above this layer imports it by
name and its optional dependencies (Ray) load only when a run asks for it.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import cast

from rlpipe.config import Config, ConfigError
from rlpipe.policy import Policy
from rlpipe.recipes.pipeline import Middleware
from rlpipe.utils.imports import import_object

__all__ = ["LOCAL_BACKEND", "REMOTE_BACKENDS", "RemoteCollect", "remote_backend", "remote_collect_half"]

RemoteCollect = Callable[[Config, Policy], AbstractContextManager[Middleware]]
"""``(cfg, policy) -> context`` yielding the middleware that feeds remote collectors' data to the learner."""

LOCAL_BACKEND = "local"
REMOTE_BACKENDS: dict[str, str] = {"ray": "rlpipe.distributed.backend:ray_collect_half"}
"""Each remote backend's name and its :data:`RemoteCollect`, as ``module:attribute``."""


def remote_backend(name: str) -> RemoteCollect:
    """The :data:`RemoteCollect` of backend ``name``, imported now; a one-line error for an unknown name."""
    path = REMOTE_BACKENDS.get(name)
    if path is None:
        known = ", ".join([LOCAL_BACKEND, *sorted(REMOTE_BACKENDS)])
        raise ConfigError(f"config key 'distributed.backend': unknown backend '{name}' (use one of {known})")
    return cast(RemoteCollect, import_object(path))


@contextmanager
def remote_collect_half(cfg: Config, policy: Policy) -> Iterator[Middleware | None]:
    """With a remote ``distributed.backend``: its collectors, started for this run of ``policy``,
    and the middleware that feeds their data to the learner; they stop at the end. None with the
    local backend: the collect half runs in the learner's process."""
    if cfg.distributed.backend == LOCAL_BACKEND:
        yield None
        return
    with remote_backend(cfg.distributed.backend)(cfg, policy) as collect:
        yield collect
