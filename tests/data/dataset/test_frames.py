"""Datasets of stacked frames kept once (format 2): the stacks read back exactly, the files hold each
frame once, and the learner's buffer samples what a dataset of whole stacks gives."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlpipe.data.dataset import Dataset, DatasetBuffer, DatasetError, frames, write_dataset
from rlpipe.data.dataset.format import FORMAT, FRAMES_FORMAT
from rlpipe.data.dataset.frames import FrameStacks, joined_stacks, to_frame_stacks

STACK, SIDE, ENVS, STEPS = 3, 6, 2, 20
OBS_SPACE = gym.spaces.Box(0, 255, (STACK, SIDE, SIDE), np.uint8)
ACTION_SPACE = gym.spaces.Discrete(3)


def stacked_columns(seed: int = 0) -> dict[str, np.ndarray]:
    """``STEPS`` vector steps of ``ENVS`` envs whose stacks move on by one random frame a step (as a frame
    stack wrapper's do), episodes of 5 steps."""
    rng = np.random.default_rng(seed)
    frames = rng.integers(0, 256, (ENVS, STEPS + STACK, SIDE, SIDE), dtype=np.uint8)
    obs = np.stack([frames[e, t:t + STACK] for t in range(STEPS) for e in range(ENVS)])
    next_obs = np.stack([frames[e, t + 1:t + 1 + STACK] for t in range(STEPS) for e in range(ENVS)])
    n = len(obs)
    return {"obs": obs, "next_obs": next_obs, "action": rng.integers(0, 3, n), "reward": rng.normal(size=n).astype(
        np.float32), "terminated": np.zeros(n, bool), "truncated": (np.arange(n) // ENVS) % 5 == 4,
        "env_id": np.tile(np.arange(ENVS), STEPS)}


@pytest.fixture
def columns() -> dict[str, np.ndarray]:
    return stacked_columns()


def test_each_frame_is_kept_once_and_the_stacks_come_back_exactly(columns):
    stacks = to_frame_stacks(columns)
    assert stacks["obs"].frames is stacks["next_obs"].frames
    assert len(stacks["obs"].frames) == ENVS * (STEPS + STACK)  # each env's frames once, not 2 x 3 per row
    for name in ("obs", "next_obs"):
        assert stacks[name].shape == columns[name].shape and stacks[name].dtype == np.uint8
        np.testing.assert_array_equal(np.asarray(stacks[name]), columns[name])
        np.testing.assert_array_equal(stacks[name][[3, 0, 7]], columns[name][[3, 0, 7]])


def test_joined_and_taken_stacks_keep_only_the_frames_their_rows_use(columns):
    halves = [to_frame_stacks({name: columns[name][part] for name in ("obs", "next_obs")})
              for part in (slice(0, 20), slice(20, None))]
    joined = joined_stacks(halves)
    for name in ("obs", "next_obs"):
        np.testing.assert_array_equal(np.asarray(joined[name]), columns[name])
    rows = np.array([5, 6, 30])
    taken = joined_stacks([{name: joined[name].take(rows) for name in ("obs", "next_obs")}])
    used = np.unique(np.concatenate([joined[name].index[rows].ravel() for name in ("obs", "next_obs")]))
    assert len(taken["obs"].frames) == len(used) < len(joined["obs"].frames)
    for name in ("obs", "next_obs"):
        np.testing.assert_array_equal(np.asarray(taken[name]), columns[name][rows])


def test_parts_with_more_frames_than_the_index_holds_are_refused_in_one_line(columns, monkeypatch):
    halves = [to_frame_stacks({name: columns[name][part] for name in ("obs", "next_obs")})
              for part in (slice(0, 20), slice(20, None))]
    used = len(joined_stacks(halves)["obs"].frames)
    monkeypatch.setattr(frames, "MAX_FRAMES", used - 1)  # the int32 limit, brought within a test's reach
    with pytest.raises(DatasetError, match=rf"^a dataset holds at most {used - 1} distinct frames, these parts "
                                           rf"use {used}$"):
        joined_stacks(halves)


def test_a_frame_dataset_reads_back_as_the_stacks_in_a_fraction_of_the_bytes(columns, tmp_path):
    plain = write_dataset(tmp_path / "plain", columns, OBS_SPACE, ACTION_SPACE, "Toy-v0", {})
    framed = write_dataset(tmp_path / "framed", {**columns, **to_frame_stacks(columns)}, OBS_SPACE, ACTION_SPACE,
                           "Toy-v0", {})
    assert plain.manifest["format"] == FORMAT and plain.stored_frames is None
    assert framed.manifest["format"] == FRAMES_FORMAT and framed.stored_frames == ENVS * (STEPS + STACK)
    reopened = Dataset.open(framed.path)
    assert isinstance(reopened.columns["obs"], FrameStacks)
    for name, values in columns.items():
        np.testing.assert_array_equal(np.asarray(reopened.columns[name]), values, err_msg=name)
    assert reopened.manifest["episodes"] == plain.manifest["episodes"]
    frame_bytes = sum(f.stat().st_size for f in framed.path.iterdir())
    plain_bytes = sum(f.stat().st_size for f in plain.path.iterdir())
    assert frame_bytes < 0.6 * plain_bytes  # 46 frames against 240 stacks of 3 (small frames: headers weigh)


def test_the_learners_buffer_samples_the_same_batches_as_from_whole_stacks(columns, tmp_path):
    plain = write_dataset(tmp_path / "plain", columns, OBS_SPACE, ACTION_SPACE, "Toy-v0", {})
    framed = write_dataset(tmp_path / "framed", {**columns, **to_frame_stacks(columns)}, OBS_SPACE, ACTION_SPACE,
                           "Toy-v0", {})
    from_plain, from_frames = DatasetBuffer(plain, seed=4), DatasetBuffer(framed, seed=4)
    for _ in range(3):
        expected, got = from_plain.sample_batch(16), from_frames.sample_batch(16)
        np.testing.assert_array_equal(got.indices, expected.indices)
        for name in columns:
            np.testing.assert_array_equal(got.data[name], expected.data[name], err_msg=name)
    items = from_frames.sample(2)  # the seed's item API gets whole stacks too
    assert items[0].data["obs"].shape == (STACK, SIDE, SIDE)
    with pytest.raises(DatasetError, match="is read-only: cannot push"):
        from_frames.push_batch(columns)  # refused before the frames (a read-only map) could be touched


def test_a_changed_frames_file_or_stacks_outside_their_frames_are_one_line_errors(columns, tmp_path):
    framed = write_dataset(tmp_path / "framed", {**columns, **to_frame_stacks(columns)}, OBS_SPACE, ACTION_SPACE,
                           "Toy-v0", {})
    frames_file = framed.path / "frames.npy"
    data = bytearray(frames_file.read_bytes())
    data[-1] ^= 0xFF
    frames_file.write_bytes(bytes(data))
    with pytest.raises(DatasetError, match=r"dataset file .*frames\.npy does not match its SHA-256"):
        Dataset.open(framed.path)
    stacks = to_frame_stacks(columns)
    beyond = FrameStacks(stacks["obs"].frames, stacks["obs"].index + len(stacks["obs"].frames) // 2)
    with pytest.raises(DatasetError, match="frame stacks 'obs' index frames outside the 46 given"):
        write_dataset(tmp_path / "bad", {**columns, **stacks, "obs": beyond}, OBS_SPACE, ACTION_SPACE, "Toy-v0", {})
    assert not (tmp_path / "bad").exists()
