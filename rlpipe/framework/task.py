"""The task: runs a list of middleware, iteration after iteration.

Glossary
--------
middleware
    A callable ``fn(ctx) -> None``, or a generator function: code before ``yield`` runs on
    the way forward, code after it on the way back (after every later middleware of the
    same iteration), in reverse order of the forward parts.
iteration
    One pass over all middleware with one context; then the context is renewed.
"""
from __future__ import annotations

import enum
import inspect
import sys
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from rlpipe.framework.context import Context, OnlineRLContext

Middleware = Callable[[Any], Any]
T = TypeVar("T")


class Role(str, enum.Enum):
    """Roles a process can play in a (possibly distributed) pipeline."""

    LEARNER = "learner"
    COLLECTOR = "collector"
    EVALUATOR = "evaluator"
    FETCHER = "fetcher"


class Router:
    """Message router between processes. In a single process nothing is connected."""

    @property
    def is_active(self) -> bool:
        """True only when this process is part of a multi-process pipeline."""
        return False


def _void(ctx: Any) -> None:
    """A middleware that does nothing."""


class _Backward:
    """The after-``yield`` part of one generator middleware, callable at most once."""

    __slots__ = ("_gen", "_task")

    def __init__(self, task: Task, gen: Generator[Any, Any, Any] | None) -> None:
        self._task = task
        self._gen = gen

    def __call__(self) -> None:
        gen, self._gen = self._gen, None
        if gen is None:
            return
        self._task._pending.remove(gen)
        _finish_generator(gen)


def _finish_generator(gen: Generator[Any, Any, Any]) -> None:
    try:
        next(gen)
    except StopIteration:
        return
    raise RuntimeError(f"middleware {gen!r} yielded more than once")


class Task:
    """Owns the middleware list and the context, and runs iterations."""

    role = Role

    def __init__(self) -> None:
        self.router = Router()
        self._roles: set[Role] = set()
        self._middleware: list[Middleware] = []
        self._wrappers: list[Callable[[Middleware], Middleware]] = []
        self._pending: list[Generator[Any, Any, Any]] = []
        self.ctx: Context = OnlineRLContext()
        self._finish = False

    # ---- building the pipeline -------------------------------------------------
    def use(self, fn: Middleware, lock: bool = False) -> Task:
        """Append a middleware; ``lock`` is accepted for API compatibility (one thread here)."""
        for wrapper in self._wrappers:
            fn = wrapper(fn)
        self._middleware.append(fn)
        return self

    def use_wrapper(self, wrapper: Callable[[Middleware], Middleware]) -> Task:
        """Wrap every middleware added from now on (and those added before) with ``wrapper``."""
        self._wrappers.append(wrapper)
        self._middleware = [wrapper(fn) for fn in self._middleware]
        return self

    @property
    def middleware(self) -> list[Middleware]:
        """The middleware in the order they run."""
        return list(self._middleware)

    # ---- roles -------------------------------------------------------------------
    def add_role(self, role: Role) -> Task:
        self._roles.add(Role(role))
        return self

    def has_role(self, role: Role) -> bool:
        return Role(role) in self._roles

    def void(self) -> Middleware:
        """A middleware that does nothing (returned for roles this process does not play)."""
        return _void

    # ---- running -----------------------------------------------------------------
    @property
    def finish(self) -> bool:
        return self._finish

    @finish.setter
    def finish(self, value: bool) -> None:
        self._finish = bool(value)

    def forward(self, fn: Middleware, ctx: Context | None = None) -> _Backward:
        """Run ``fn``'s forward part; its backward part is queued for :meth:`backward`."""
        result = fn(self.ctx if ctx is None else ctx)
        if not inspect.isgenerator(result):
            return _Backward(self, None)
        try:
            next(result)
        except StopIteration:
            return _Backward(self, None)
        self._pending.append(result)
        return _Backward(self, result)

    def backward(self) -> None:
        """Run every pending backward part, last forward first."""
        while self._pending:
            _finish_generator(self._pending.pop())

    def wrap(self, fn: Middleware) -> Callable[[Context], _Backward]:
        """Make ``fn`` callable from another middleware.

        The returned callable runs ``fn``'s forward part on the given context and returns a
        callable for its backward part. If the caller never calls it, the backward part
        runs at the end of the iteration with the other pending ones.
        """
        for wrapper in self._wrappers:
            fn = wrapper(fn)

        def run_forward(ctx: Context) -> _Backward:
            return self.forward(fn, ctx)

        return run_forward

    def run_iteration(self) -> None:
        """One iteration: every middleware forward, then the backward parts, then renew.

        Setting :attr:`finish` does not cut the iteration short: the middleware after the
        one that set it still run (a checkpoint saver saves the final state, a logger writes
        the last metrics), and then :meth:`run` stops.
        """
        for fn in self._middleware:
            self.forward(fn)
        self.backward()
        self.ctx.finish = self._finish
        if not self._finish:
            self.renew()

    def run(self, max_step: int = sys.maxsize) -> None:
        """Run up to ``max_step`` iterations, stopping early once :attr:`finish` is set."""
        for _ in range(max_step):
            self.run_iteration()
            if self._finish:
                break

    def renew(self) -> None:
        self.ctx = self.ctx.renew()

    @contextmanager
    def start(self, ctx: Context | None = None) -> Iterator[Task]:
        """Context manager for one pipeline: fresh state on entry, cleaned up on exit."""
        self.reset()
        self.ctx = ctx if ctx is not None else OnlineRLContext()
        try:
            yield self
        finally:
            self.reset()

    def reset(self) -> None:
        """Forget middleware, wrappers, roles, pending backward parts and the finish flag."""
        self._middleware.clear()
        self._wrappers.clear()
        self._pending.clear()
        self._roles.clear()
        self._finish = False


task = Task()
"""The module-level task used by the seed-style API (``from rlpipe.framework import task``)."""


def role_gated(role: Role) -> Callable[[T], T]:
    """Class decorator: construct ``task.void()`` instead when a distributed process lacks ``role``.

    This is the one place role filtering lives; middleware classes declare their role with it.
    """

    def decorate(cls: T) -> T:
        original_new = cls.__new__  # type: ignore[misc]

        def __new__(klass: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N807 - replaces cls.__new__
            if task.router.is_active and not task.has_role(role):
                return task.void()
            if original_new is object.__new__:
                return object.__new__(klass)
            return original_new(klass, *args, **kwargs)

        cls.__new__ = staticmethod(__new__)  # type: ignore[misc, assignment]
        return cls

    return decorate
