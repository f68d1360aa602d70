"""Crashes at chosen points of a save: the file-system steps of a save are its renames and
deletions (``os.replace``, ``os.unlink``); :class:`CrashPoints` raises :class:`Crash` just
before or just after the n-th of them, as a kill at that moment would leave the files."""
from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest


class Crash(BaseException):
    """A kill as the saving code sees it: a BaseException, so no ``except Exception`` handles it."""


class CrashPoints:
    """While ``armed``, count renames and deletions; crash at point ``at`` (point ``2n`` is just
    before step ``n``, ``2n + 1`` just after it). Crashes once; ``crashed`` says whether it did."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, at: int) -> None:
        self.at, self.points, self.armed, self.crashed = at, 0, False, False
        for name in ("replace", "unlink"):
            monkeypatch.setattr(os, name, self._counted(getattr(os, name)))

    def _counted(self, step: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            if not self.armed or self.crashed:
                return step(*args, **kwargs)
            self._point()
            result = step(*args, **kwargs)
            self._point()
            return result

        return counted

    def _point(self) -> None:
        if self.points == self.at:
            self.crashed = True
            raise Crash(f"crash at point {self.at}")
        self.points += 1
