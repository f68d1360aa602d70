"""Mark a user function as vectorised: called once on a whole batch instead of once per row.

The seed (DI-engine) calls user functions such as HER's ``split_func``, ``merge_func`` and
``goal_reward_func`` once per transition, so rlpipe does the same unless told otherwise.
``@batched`` tells it otherwise for one function::

    @rlpipe.batched
    def goal_reward(achieved_goal, desired_goal):  # [B, G], [B, G] -> [B]
        return (achieved_goal == desired_goal).all(-1).float()

This module imports neither numpy nor torch, so ``import rlpipe`` stays light.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["batched", "is_batched"]

_MARK = "__rlpipe_batched__"

F = TypeVar("F", bound=Callable[..., Any])


def batched(func: F) -> F:
    """``func`` marked as taking and returning whole batches (a leading batch axis).

    A Python function is marked and returned (the usual ``@batched``); any other callable (a
    builtin or numpy ufunc, a bound method, an object with ``__call__``) is wrapped in a marked
    function, so that marking never changes an object other code shares.
    """
    if not callable(func):
        raise TypeError(f"batched() marks functions, got {type(func).__name__}")
    if isinstance(func, types.FunctionType):
        setattr(func, _MARK, True)
        return func

    @functools.wraps(func)
    def marked(*args: Any, **kwargs: Any) -> Any:
        return func(*args, **kwargs)

    setattr(marked, _MARK, True)
    return marked  # type: ignore[return-value]


def is_batched(func: Callable[..., Any]) -> bool:
    """Whether ``func`` was marked with :func:`batched` (a bound method reads its function's mark)."""
    return getattr(func, _MARK, False) is True
