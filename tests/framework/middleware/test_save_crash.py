"""A crash at any point of any save leaves a complete unit: the newest checkpoint whose buffer is
the one its header names, never older than the last save that finished."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from rlpipe.data import DequeBuffer
from rlpipe.framework import OnlineRLContext
from rlpipe.framework.middleware import CkptSaver, SaveSettings, latest_checkpoint
from tests.crash_points import Crash, CrashPoints


class TinyPolicy:
    def __init__(self) -> None:
        self.net = torch.nn.Linear(2, 1)

    def state_dict(self) -> dict:
        return {"net": self.net.state_dict()}


def saves(save_dir: Path, crash: CrashPoints, periodic: bool) -> tuple[list[int], int | None]:
    """An earlier run's final save, then a resumed run's saves (periodic ones every 2 train
    iterations, keeping 1, if ``periodic``; the final one at 5) with ``crash`` armed; one item
    pushed per train iteration, so a buffer's count is the train iteration it was saved at.
    Returns the train iterations of the saves that finished and the one a crash cut short."""
    buffer, ctx = DequeBuffer(size=100), OnlineRLContext()
    buffer.push({"x": 0})
    ctx.train_iter, ctx.finish = 1, True
    CkptSaver(TinyPolicy(), save_dir, settings=SaveSettings(buffer_=buffer))(ctx)
    saver = CkptSaver(TinyPolicy(), save_dir, train_freq=2 if periodic else None,
                      settings=SaveSettings(buffer_=buffer, keep_last=1))
    finished: list[int] = [1]
    crash.armed, ctx.finish = True, False
    for train_iter in range(2, 6):
        buffer.push({"x": train_iter - 1})
        ctx.train_iter, ctx.finish = train_iter, train_iter == 5
        try:
            saver(ctx)
        except Crash:
            return finished, train_iter
        if (periodic and train_iter % 2 == 0) or ctx.finish:
            finished.append(train_iter)
    return finished, None


@pytest.mark.parametrize("periodic", [False, True], ids=["final-only", "periodic"])
def test_a_crash_at_any_point_of_a_save_leaves_a_complete_unit(tmp_path, monkeypatch, periodic):
    at = 0
    while True:
        with monkeypatch.context() as patch:
            crash = CrashPoints(patch, at)
            save_dir = tmp_path / f"crash-{at}"
            finished, cut = saves(save_dir, crash, periodic)
        unit = latest_checkpoint(save_dir)
        train_iter = unit.state["counters"]["train_iter"]
        assert train_iter in (finished[-1], cut), (at, finished, cut)  # the last finished save, or the one cut
        buffer = DequeBuffer(size=100)
        buffer.load_data(str(unit.buffer_path))
        assert buffer.count() == train_iter  # the buffer saved with that checkpoint
        if not crash.crashed:
            break
        at += 1
    # a crash before and after each rename and deletion: per save of a checkpoint with its buffer,
    # the buffer's two renames, the checkpoint's, the older buffer's deletion (and one checkpoint
    # deleted by keep_last at train iteration 4)
    assert at == (4 * 2 if not periodic else (3 * 4 + 1) * 2)
