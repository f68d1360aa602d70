"""FrameStore: stacks rebuilt byte for byte (vector envs, resets, n-step, PER, overwrite,
eviction, save/load, delete/clear), frames kept once, and one-line errors."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

from rlpipe.data import DequeBuffer, FrameStore, PriorityExperienceReplay
from rlpipe.data.buffer import frames as frames_module
from rlpipe.data.buffer.frames import FrameRing
from rlpipe.data.buffer.persist import BufferFileError
from tests.data.buffer.frame_envs import FRAME_SHAPE, STACK, vector_rows


class Pushed:
    """What was pushed, by index: the reference the rebuilt stacks must equal."""

    def __init__(self) -> None:
        self.obs: dict[int, np.ndarray] = {}
        self.next_obs: dict[int, np.ndarray] = {}

    def push(self, buf: DequeBuffer, rows: dict[str, np.ndarray]) -> np.ndarray:
        ids = buf.push_batch(rows)
        for i, index in enumerate(ids.tolist()):
            self.obs[index], self.next_obs[index] = rows["obs"][i], rows["next_obs"][i]
        return ids

    def check_all(self, buf: DequeBuffer) -> np.ndarray:
        """Every stored item equals what was pushed, by ``sample_batch(indices=)`` and ``get``; returns
        the stored indices."""
        ids = np.array([buf.get(i).index for i in range(buf.count())], dtype=np.int64)
        batch = buf.sample_batch(0, indices=ids)
        assert batch.data["obs"].shape == (len(ids), *self.obs[int(ids[0])].shape)
        assert batch.data["obs"].dtype == np.uint8
        np.testing.assert_array_equal(batch.data["obs"], np.stack([self.obs[i] for i in ids.tolist()]))
        np.testing.assert_array_equal(batch.data["next_obs"], np.stack([self.next_obs[i] for i in ids.tolist()]))
        for i in range(0, buf.count(), 7):
            item = buf.get(i)
            np.testing.assert_array_equal(item.data["obs"], self.obs[item.index])
            np.testing.assert_array_equal(item.data["next_obs"], self.next_obs[item.index])
        return ids

    def check_sampled(self, batch_data: dict, indices: np.ndarray) -> None:
        np.testing.assert_array_equal(batch_data["obs"], np.stack([self.obs[i] for i in indices.tolist()]))
        np.testing.assert_array_equal(batch_data["next_obs"], np.stack([self.next_obs[i] for i in indices.tolist()]))


def store(size: int = 400, seed: int = 0, **kwargs) -> tuple[DequeBuffer, FrameStore]:
    buf = DequeBuffer(size, seed=seed)
    fs = FrameStore(buf, **kwargs)
    buf.use(fs)
    return buf, fs


@pytest.mark.parametrize("padding", ["reset", "zero"])
@pytest.mark.parametrize("nstep", [1, 3])
def test_stacks_rebuilt_over_vector_envs_with_resets(padding: str, nstep: int) -> None:
    buf, _ = store(size=2000)
    pushed = Pushed()
    ends = 0
    for rows in vector_rows(5, 150, nstep=nstep, padding=padding):
        pushed.push(buf, rows)
        ends += int(np.count_nonzero(rows["terminated"] | rows["truncated"]))
    assert ends > 30 and buf.count() > 600  # many episode starts and ends, truncated ones too
    pushed.check_all(buf)
    batch = buf.sample_batch(64)
    pushed.check_sampled(batch.data, batch.indices)
    for item in buf.sample(20):
        np.testing.assert_array_equal(item.data["obs"], pushed.obs[item.index])


def test_each_frame_is_stored_once() -> None:
    """Distinct frames, padding with the reset frame: an episode's T steps bring T + 1 frames."""
    buf, fs = store(size=5000)
    rows_pushed, starts = 0, 4  # the first episode of each env starts with the first rows
    for rows in vector_rows(4, 200, distinct=True):
        buf.push_batch(rows)
        rows_pushed += len(rows["reward"])
        last_ends = int(np.count_nonzero(rows["terminated"] | rows["truncated"]))
        starts += last_ends
    assert fs.ring.next_id == rows_pushed + starts - last_ends  # the last step's new episodes: not pushed


def test_frames_shared_across_envs_and_repeats() -> None:
    """Equal frames are stored once, whichever env showed them: blank frames and repeats."""
    buf, fs = store(size=5000)
    pushed = Pushed()
    for rows in vector_rows(4, 200):
        pushed.push(buf, rows)
    distinct = {frame.tobytes() for stacks in (pushed.obs, pushed.next_obs) for s in stacks.values() for frame in s}
    assert fs.ring.next_id == len(distinct)


@pytest.mark.parametrize("per_first", [True, False])
def test_composes_with_priority_replay(per_first: bool) -> None:
    buf = DequeBuffer(300, seed=1)
    per = PriorityExperienceReplay(buf, IS_weight_anneal_train_iter=10)
    fs = FrameStore(buf, frame_capacity=330, window=40)
    for mw in ((per, fs) if per_first else (fs, per)):
        buf.use(mw)
    pushed = Pushed()
    for rows in vector_rows(4, 120, nstep=3, end_prob=0.5, max_steps=3):  # short episodes: evictions
        pushed.push(buf, rows)
    assert fs.evicted > 0 and buf.count() < 300
    stored = pushed.check_all(buf)
    buf.update_priority(stored, np.where(np.arange(len(stored)) % 2 == 0, 0.0, 5.0))
    drawn = []
    for _ in range(5):
        batch = buf.sample_batch(32)
        assert batch.data["weight"].shape == (32,)
        pushed.check_sampled(batch.data, batch.indices)
        drawn.append(batch.indices)
    assert np.isin(np.concatenate(drawn), stored[1::2]).mean() > 0.95  # priorities rule the draws


def test_ring_overwrite_frees_frames() -> None:
    """Far more transitions than the buffer holds: the newest are kept, exact, in a bounded ring."""
    buf, fs = store(size=100, frame_capacity=200, window=32)
    pushed = Pushed()
    for rows in vector_rows(3, 400, nstep=3, distinct=True):
        pushed.push(buf, rows)
    assert buf.count() == 100 and fs.evicted == 0
    assert fs.ring.next_id > 3 * fs.ring.capacity  # the frame ring went round several times
    stored = pushed.check_all(buf)
    np.testing.assert_array_equal(stored, np.arange(max(pushed.obs) - 99, max(pushed.obs) + 1))


def test_stored_rows_give_ring_slots_not_stacks() -> None:
    """``stored_rows`` skips the middleware's reading: the stack fields are the ring slots whose frames
    are the pushed stacks; ``overwritten`` turns true once the buffer's ring goes round."""
    buf, fs = store(size=100)
    pushed = Pushed()
    rows_seen = 0
    for rows in vector_rows(2, 80, distinct=True):
        pushed.push(buf, rows)
        rows_seen += len(rows["reward"])
        assert buf.overwritten == (rows_seen > 100)
    assert buf.overwritten
    ids = buf.ids_at(buf.ordered_slots())
    raw = buf.stored_rows(ids)
    assert raw["obs"].dtype == np.int32 and raw["obs"].shape == (len(ids), STACK)
    np.testing.assert_array_equal(fs.ring.gather(raw["obs"]), np.stack([pushed.obs[i] for i in ids.tolist()]))
    np.testing.assert_array_equal(raw["reward"], buf.sample_batch(0, indices=ids).data["reward"])
    with pytest.raises(ValueError, match="not in the buffer"):
        buf.stored_rows(np.array([int(ids[0]) - 1]))


def test_short_episodes_drop_the_oldest_transitions_early(caplog: pytest.LogCaptureFixture) -> None:
    """One-step episodes need two frames a transition: the ring of 1.2x frames keeps the newest
    transitions whose frames fit, logs once, and never shows an overwritten frame."""
    buf, fs = store(size=200, frame_capacity=240, window=16)
    pushed = Pushed()
    with caplog.at_level(logging.WARNING):
        for rows in vector_rows(4, 300, end_prob=1.0, distinct=True):
            pushed.push(buf, rows)
            if buf.count():
                pushed.check_sampled(*_sampled(buf))
    assert sum("raise frame_capacity" in r.message for r in caplog.records) == 1
    newest = max(pushed.obs)
    assert 100 <= buf.count() <= (240 - 16) // 2 < 200
    assert fs.evicted == 4 * 300 - buf.count()  # all dropped before the buffer's ring reached them
    stored = pushed.check_all(buf)
    np.testing.assert_array_equal(stored, np.arange(newest - len(stored) + 1, newest + 1))


def _sampled(buf: DequeBuffer) -> tuple[dict, np.ndarray]:
    batch = buf.sample_batch(min(16, buf.count()))
    return batch.data, batch.indices


def test_large_push_is_split_to_fit_the_ring() -> None:
    buf, fs = store(size=300, frame_capacity=100, window=20)
    pushed = Pushed()
    rows = {key: np.concatenate([r[key] for r in vector_rows(4, 60, distinct=True)]) for key in ("obs", "next_obs")}
    pushed.push(buf, {**rows, "action": np.arange(len(rows["obs"]))})  # 240 rows, ~300 new frames
    assert fs.evicted > 0
    pushed.check_all(buf)


def test_save_load_round_trip(tmp_path) -> None:
    def make():
        buf = DequeBuffer(500, seed=3)
        buf.use(PriorityExperienceReplay(buf))
        fs = FrameStore(buf, frame_capacity=600, window=64)
        buf.use(fs)
        return buf, fs

    buf, fs = make()
    pushed = Pushed()
    batches = list(vector_rows(4, 300, nstep=3))
    for rows in batches[:200]:
        pushed.push(buf, rows)
    buf.delete(pushed.check_all(buf)[:5])
    buf.save_data(str(tmp_path / "b.npz"))
    loaded, fs2 = make()
    loaded.load_data(str(tmp_path / "b.npz"))
    assert loaded.count() == buf.count() and fs2.ring.next_id == fs.ring.next_id
    pushed.check_all(loaded)
    for rows in batches[200:]:  # both go on alike: same frames written, same draws
        buf.push_batch(rows)
        pushed.push(loaded, rows)
    assert fs2.ring.next_id == fs.ring.next_id and fs2.evicted == fs.evicted
    pushed.check_all(loaded)
    a, b = buf.sample_batch(32), loaded.sample_batch(32)
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_array_equal(a.data["obs"], b.data["obs"])


def test_load_refuses_another_frame_capacity(tmp_path) -> None:
    buf, _ = store(size=50)
    for rows in vector_rows(2, 10):
        buf.push_batch(rows)
    buf.save_data(str(tmp_path / "b.npz"))
    other, _ = store(size=50, frame_capacity=5000)
    with pytest.raises(BufferFileError, match=r"frame_capacity 2099; this buffer's FrameStore has .* and 5000"):
        other.load_data(str(tmp_path / "b.npz"))


def test_delete_and_clear() -> None:
    buf, _ = store(size=300)
    pushed = Pushed()
    for rows in vector_rows(3, 40):
        pushed.push(buf, rows)
    stored = pushed.check_all(buf)
    buf.delete(stored[::2])
    assert not np.isin(pushed.check_all(buf), stored[::2]).any()
    buf.clear()
    assert buf.count() == 0
    for rows in vector_rows(3, 40, seed=7):
        pushed.push(buf, rows)
    assert buf.count() == 120
    pushed.check_all(buf)


def test_single_push_update_and_tensors() -> None:
    buf, fs = store(size=20)
    rng = np.random.default_rng(0)
    stack = rng.integers(0, 256, (STACK, *FRAME_SHAPE), dtype=np.uint8)
    following = np.concatenate([stack[1:], rng.integers(0, 256, (1, *FRAME_SHAPE), dtype=np.uint8)])
    data = {"obs": torch.from_numpy(stack), "next_obs": torch.from_numpy(following), "action": 1}
    item = buf.push(data)
    assert item.data is data and fs.ring.next_id == STACK + 1
    got = buf.get_by_index(item.index).data
    assert isinstance(got["obs"], torch.Tensor) and torch.equal(got["obs"], data["obs"])
    assert torch.equal(buf.sample_batch(1).data["next_obs"][0], data["next_obs"])
    assert buf.update(item.index, {"obs": torch.from_numpy(following), "next_obs": data["obs"], "action": 2})
    assert torch.equal(buf.get(0).data["obs"], data["next_obs"]) and fs.ring.next_id == STACK + 1


def test_episode_items_with_a_given_stack_shape() -> None:
    buf, _ = store(size=50, stack_shape=(STACK, *FRAME_SHAPE))
    episode = {key: np.concatenate([r[key] for r in vector_rows(1, 6)]) for key in ("obs", "next_obs")}
    buf.push(episode)
    np.testing.assert_array_equal(buf.get(0).data["next_obs"], episode["next_obs"])


def test_hash_collisions_never_mix_frames(monkeypatch: pytest.MonkeyPatch) -> None:
    """With every frame hashing alike, each is still checked byte for byte and stored right."""
    monkeypatch.setattr(frames_module, "frame_hashes", lambda frames, _: np.zeros(len(frames), np.uint64))
    buf, _ = store(size=500)
    pushed = Pushed()
    for rows in vector_rows(3, 60, nstep=3):
        pushed.push(buf, rows)
    pushed.check_all(buf)


STACKS = np.zeros((2, STACK, *FRAME_SHAPE), np.uint8)


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ({"obs": STACKS}, "no field 'next_obs'"),
        ({"obs": STACKS, "next_obs": STACKS[..., 0]}, "field 'next_obs' has shape"),
        ({"obs": STACKS, "next_obs": STACKS.astype(np.float64)}, "has dtype float64"),
        ({"obs": STACKS[:, :, 0, 0], "next_obs": STACKS[:, :, 0, 0]}, r"expected stacks of shape \(4,\)"),
    ],
)
def test_bad_pushes_are_one_line_errors(rows: dict, message: str) -> None:
    buf, _ = store(size=10)
    with pytest.raises(ValueError, match=message) as err:
        buf.push_batch(rows)
    assert "\n" not in str(err.value) and buf.count() == 0


def test_frame_ring_checks_its_sizes() -> None:
    with pytest.raises(ValueError, match="must be larger than the frame window"):
        FrameRing(10, 10)
    with pytest.raises(ValueError, match="one pushed row or item brings 8 new frames, more than the 4"):
        buf, _ = store(size=10, frame_capacity=8, window=4)
        rng = np.random.default_rng(0)
        buf.push_batch({"obs": rng.integers(0, 256, (1, 4, 6, 5), np.uint8),
                        "next_obs": rng.integers(0, 256, (1, 4, 6, 5), np.uint8)})
