"""FrameStore on rlpipe's Atari env (zero-padded stacks, lives, no-op starts): every stored
transition rebuilds the stacks the env returned, with n-step rows too."""

from __future__ import annotations

import numpy as np
import pytest

from rlpipe.data import DequeBuffer, FrameStore
from tests.data.buffer.frame_envs import vector_rows
from tests.data.buffer.test_frame_store import Pushed

pytest.importorskip("ale_py")
from rlpipe.envs.atari import make_atari_env


@pytest.mark.parametrize("nstep", [1, 3])
def test_pong_stacks_rebuilt_byte_for_byte(layout: str, nstep: int) -> None:
    if layout == "records":
        pytest.skip("the env's frames do not depend on the layout; one run is enough")
    buf = DequeBuffer(2000, seed=0)
    store = FrameStore(buf)
    buf.use(store)
    pushed = Pushed()
    ends = 0
    for rows in vector_rows(2, 400, nstep=nstep, make_env=lambda: make_atari_env("ALE/Pong-v5")):
        pushed.push(buf, rows)
        ends += int(np.count_nonzero(rows["terminated"] | rows["truncated"]))
    assert pushed.check_all(buf).shape == (buf.count(),) and buf.count() >= 790
    # one frame per step, one more per episode (its first or last), one zero frame for padding
    assert store.ring.next_id <= buf.count() + ends + 2 + 1, (store.ring.next_id, buf.count(), ends)
