"""Fragments of stacked-frame envs carry each frame once: packing, and the learner's exact rebuild."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

import rlpipe.data.buffer.frames as frames_module
from rlpipe.config import load_config
from rlpipe.distributed import CollectorHalf
from rlpipe.distributed.fragment import pack_frames, unpack_frames
from rlpipe.recipes.build import build_parts
from tests.data.buffer.frame_envs import vector_rows


def assert_same_rows(got: dict[str, np.ndarray], expected: dict[str, np.ndarray]) -> None:
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        assert got[key].dtype == value.dtype, key
        np.testing.assert_array_equal(got[key], value, err_msg=key)


@pytest.mark.parametrize(("nstep", "padding"), [(1, "reset"), (1, "zero"), (3, "reset")])
def test_packed_rows_rebuild_exactly_with_each_frame_once(nstep: int, padding: str) -> None:
    rows_seen = 0
    for rows in vector_rows(3, 60, nstep=nstep, padding=padding):
        packed, frames = pack_frames(rows)
        n = len(rows["reward"])
        rows_seen += n
        assert packed["obs"].shape == packed["next_obs"].shape == (n, 4) and packed["obs"].dtype == np.int32
        distinct = np.unique(np.concatenate([rows["obs"], rows["next_obs"]]).reshape(-1, 30), axis=0)
        assert len(frames) == len(distinct)  # each distinct frame once, no more
        assert_same_rows(unpack_frames(packed, frames), rows)
    assert rows_seen > 100


def test_hash_collisions_never_mix_frames(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(frames_module, "frame_hashes", lambda frames, _: np.zeros(len(frames), np.uint64))
    rows = next(vector_rows(4, 5, distinct=True))
    packed, frames = pack_frames(rows)
    assert_same_rows(unpack_frames(packed, frames), rows)


def wire_bytes_per_transition(fragment) -> float:
    """What a fragment weighs as Ray's pickle carries it, per transition."""
    return len(pickle.dumps(fragment, protocol=5)) / len(fragment.transitions["reward"])


@pytest.mark.parametrize("nstep", [1, 3])
def test_pong_fragments_rebuild_the_envs_stacks_in_an_eighth_of_the_bytes_or_less(nstep: int) -> None:
    """Two collectors of one seed, one packing (the frame store's default for ALE) and one not
    (``frame_store=false``): the packed fragments rebuild the other's transitions exactly,
    episode ends and resets included."""
    pytest.importorskip("ale_py")
    overrides = ["env.collector_env_num=2", "policy.collect.n_sample=96", f"policy.nstep={nstep}",
                 "policy.other.replay_buffer.replay_buffer_size=1000",
                 "policy.random_collect_size=0", "env.atari={max_episode_steps: 30}"]
    halves = []
    for frame_store in ("auto", "false"):
        with build_parts(load_config("pong-dqn", [*overrides, f"policy.other.replay_buffer.frame_store={frame_store}"]),
                         ) as parts:
            halves.append(CollectorHalf(parts.cfg, index=0))
    try:
        ends = 0
        for _ in range(3):
            packed, plain = (half.collect(0) for half in halves)
            assert packed.frames is not None and plain.frames is None
            assert_same_rows(packed.stacked_transitions(), plain.transitions)
            ends += int((plain.transitions["terminated"] | plain.transitions["truncated"]).sum())
            assert wire_bytes_per_transition(packed) * 5 < wire_bytes_per_transition(plain)
        assert ends >= 4
    finally:
        for half in halves:
            half.close()
