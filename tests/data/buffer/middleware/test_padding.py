"""padding: sampled groups padded to the largest one."""

from __future__ import annotations

import numpy as np
import pytest

from rlpipe.data import DequeBuffer, padding


def test_random_and_none_padding() -> None:
    for policy in ("random", "none"):
        buf = DequeBuffer(20, seed=0).use(padding(policy, seed=0))
        buf.push_batch({"t": np.arange(7)}, {"env": np.array([0] * 5 + [1] * 2)})
        groups = {len(set(i.index for i in g)): g for g in buf.sample(2, groupby="env")}
        assert all(len(g) == 5 for g in groups.values())
        short = groups[2] if policy == "random" else groups[3]
        if policy == "random":
            assert {int(item.meta["env"]) for item in short} == {1}
        else:
            assert [item.index for item in short[2:]] == [-1, -1, -1]
    with pytest.raises(ValueError, match="padding policy"):
        padding("zeros")
