"""Graceful stops: SIGINT (Ctrl-C) and SIGTERM finish the iteration in flight, then stop.

The pipeline ends as it does on any stop condition: the checkpoint saver writes
``final.pth.tar`` (and the buffer), the logger its last records, and ``summary.json`` is
written, so the run can be resumed. A second signal stops at once (``KeyboardInterrupt``).
"""
from __future__ import annotations

import signal
import threading
from types import FrameType, TracebackType
from typing import Any

from rlpipe.framework.context import OnlineRLContext

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class graceful_stop:  # noqa: N801 - a middleware, named like the seed's functions
    """A context manager that catches :data:`STOP_SIGNALS` while it is open, and the middleware
    (put it first in the pipeline) that sets ``ctx.finish`` at the next iteration once one came.

    Put first, the whole iteration that follows still runs with ``ctx.finish`` set, so the
    middleware that save on finish see it, wherever in the iteration the signal arrived.
    Outside the main thread signals cannot be caught; there it does nothing.
    """

    def __init__(self) -> None:
        self.received: signal.Signals | None = None
        """The signal that asked for the stop (None: none came)."""
        self._previous: dict[signal.Signals, Any] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.received is not None:
            raise KeyboardInterrupt  # asked twice: stop now
        self.received = signal.Signals(signum)

    def __enter__(self) -> graceful_stop:
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def __call__(self, ctx: OnlineRLContext) -> None:
        if self.received is not None:
            ctx.finish = True
