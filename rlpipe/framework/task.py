"""The task: runs a list of middleware, iteration after iteration.

Glossary
--------
middleware
    A callable ``fn(ctx) -> None``, or a generator function: code before ``yield`` runs on
    the way forward, code after it on the way back (after every later middleware of the
    same iteration), in reverse order of the forward parts.
iteration
    One pass over all middleware with one context; then the context is renewed.
finish
    ``ctx.finish``: set by any middleware to stop after the current iteration.
    ``Task.finish`` reads and writes the same flag, so no middleware needs the task itself.
role
    What a process does in a distributed pipeline. A middleware class declares its role
    with :func:`role_gated`; :meth:`Task.use` leaves it out where that role is not played.
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


def _finish_generator(gen: Generator[Any, Any, Any]) -> None:
    try:
        next(gen)
    except StopIteration:
        return
    raise RuntimeError(f"middleware {gen!r} yielded more than once")


def _start(fn: Middleware, ctx: Context) -> Generator[Any, Any, Any] | None:
    """Run ``fn``'s forward part; the suspended generator if it has a backward part, else None."""
    result = fn(ctx)
    if not inspect.isgenerator(result):
        return None
    try:
        next(result)
    except StopIteration:
        return None
    return result


class _Backward:
    """The after-``yield`` part of one generator middleware, callable at most once.

    ``pending``: a list the generator is also queued on (a task's), removed from it when
    this runs; None when the caller alone is responsible for running it.
    """

    __slots__ = ("_gen", "_pending")

    def __init__(self, gen: Generator[Any, Any, Any] | None, pending: list[Any] | None = None) -> None:
        self._gen = gen
        self._pending = pending

    def __call__(self) -> None:
        gen, self._gen = self._gen, None
        if gen is None:
            return
        if self._pending is not None:
            self._pending.remove(gen)
        _finish_generator(gen)


def call_middleware(fn: Middleware, ctx: Context) -> Callable[[], None]:
    """Run ``fn`` on ``ctx`` from inside another middleware, without any task.

    Returns a callable that runs ``fn``'s backward part (the code after its ``yield``); the
    caller must call it. This is how the learners compose fetcher, estimator and trainer.
    """
    return _Backward(_start(fn, ctx))


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

    # ---- building the pipeline -------------------------------------------------
    def use(self, fn: Middleware, lock: bool = False) -> Task:
        """Append a middleware; ``lock`` is accepted for API compatibility (one thread here).

        A middleware whose class declares a role (:func:`role_gated`) is left out when this
        task is part of a distributed pipeline and does not play that role.
        """
        role = getattr(type(fn), "middleware_role", None)
        if role is not None and self.router.is_active and not self.has_role(role):
            return self
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
        """A middleware that does nothing (the seed's stand-in for one of a role this process does not play)."""
        return _void

    # ---- running -----------------------------------------------------------------
    @property
    def finish(self) -> bool:
        """Whether the pipeline stops after this iteration: the current context's ``finish``."""
        return self.ctx.finish

    @finish.setter
    def finish(self, value: bool) -> None:
        self.ctx.finish = bool(value)

    def forward(self, fn: Middleware, ctx: Context | None = None) -> _Backward:
        """Run ``fn``'s forward part; its backward part is queued for :meth:`backward`."""
        gen = _start(fn, self.ctx if ctx is None else ctx)
        if gen is None:
            return _Backward(None)
        self._pending.append(gen)
        return _Backward(gen, self._pending)

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

        Setting ``ctx.finish`` does not cut the iteration short: the middleware after the
        one that set it still run (a checkpoint saver saves the final state, a logger writes
        the last metrics), and then :meth:`run` stops, leaving that context as ``self.ctx``.
        """
        for fn in self._middleware:
            self.forward(fn)
        self.backward()
        if not self.ctx.finish:
            self.renew()

    def run(self, max_step: int = sys.maxsize) -> None:
        """Run up to ``max_step`` iterations, stopping early once ``ctx.finish`` is set."""
        for _ in range(max_step):
            self.run_iteration()
            if self.ctx.finish:
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
        self.ctx.finish = False


task = Task()
"""The module-level task used by the seed-style API (``from rlpipe.framework import task``)."""


def role_gated(role: Role) -> Callable[[T], T]:
    """Class decorator declaring the role a middleware class belongs to.

    :meth:`Task.use` reads it: this is the one place role filtering lives, and it consults the
    task the middleware is used on, never a global one. The class itself is left unchanged,
    so its signature and ``help()`` stay its own.
    """

    def decorate(cls: T) -> T:
        cls.middleware_role = Role(role)  # type: ignore[attr-defined]
        return cls

    return decorate
