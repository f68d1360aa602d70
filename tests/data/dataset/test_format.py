"""A dataset on disk: written whole or not at all, opened as memory maps, every byte checked."""
from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest

from rlpipe.data.dataset import COLUMNS, Dataset, DatasetError, find_episodes, write_dataset
from rlpipe.data.dataset.spaces import space_from_json, space_to_json, spaces_match
from tests.data.dataset.conftest import ACTION_SPACE, OBS_SPACE, interleaved_columns


def write(path, columns, **kwargs):
    return write_dataset(path, columns, OBS_SPACE, ACTION_SPACE, "Toy-v0", {"source": "test"}, **kwargs)


def test_a_written_dataset_opens_with_the_same_rows_as_memory_maps(tmp_path, columns):
    made = write(tmp_path / "data", columns, reference_returns={"random": 0.0, "expert": 20.0})
    opened = Dataset.open(tmp_path / "data")
    assert opened.size == 120 and opened.seal == made.seal and opened.env_id == "Toy-v0"
    for name in COLUMNS:
        assert isinstance(opened.columns[name], np.memmap), name  # read on demand, not copied into memory
        np.testing.assert_array_equal(opened.columns[name], columns[name])
    assert spaces_match(opened.observation_space, OBS_SPACE) and spaces_match(opened.action_space, ACTION_SPACE)
    assert opened.manifest["reference_returns"] == {"random": 0.0, "expert": 20.0}


def test_episodes_are_found_in_interleaved_rows_with_their_returns(columns):
    episodes = find_episodes(columns["env_id"], columns["terminated"] | columns["truncated"], columns["reward"])
    assert len(episodes.rows) == 12 and (episodes.lengths == 10).all()
    assert sorted(episodes.returns.tolist()) == [10.0] * 6 + [20.0] * 6  # env 0 earns 1 a step, env 1 earns 2
    for rows in episodes.rows:
        assert len(set(columns["env_id"][rows])) == 1 and (np.diff(rows) == 2).all()  # one env, in time order
    partial = find_episodes(columns["env_id"], columns["truncated"], columns["reward"], first_partial=True)
    assert len(partial.rows) == 10  # each env's first episode may have begun before the data


def test_an_episode_still_running_at_the_end_is_not_counted():
    cols = interleaved_columns(steps=65)  # the last 5 steps of each env start an episode that does not end
    episodes = find_episodes(cols["env_id"], cols["truncated"], cols["reward"])
    assert len(episodes.rows) == 12 and sum(len(r) for r in episodes.rows) == 120


@pytest.mark.parametrize("space", [
    gym.spaces.Box(0, 255, (4, 10, 10), np.uint8), gym.spaces.Box(np.array([-1.0, 0.0]), np.array([1.0, 5.0])),
    gym.spaces.Discrete(5), gym.spaces.Discrete(3, start=1), gym.spaces.MultiBinary(6),
    gym.spaces.MultiDiscrete([3, 4]),
])
def test_spaces_round_trip_through_json(space):
    back = space_from_json(json.loads(json.dumps(space_to_json(space))))
    assert back == space and spaces_match(back, space)


def test_a_dict_space_is_refused_in_one_line(tmp_path, columns):
    with pytest.raises(DatasetError, match="cannot make a dataset of env 'Toy-v0': a dataset holds Box"):
        write_dataset(tmp_path / "d", columns, gym.spaces.Dict({"a": OBS_SPACE}), ACTION_SPACE, "Toy-v0", {})


def test_a_changed_byte_in_a_column_file_is_refused_naming_the_file(tmp_path, columns):
    write(tmp_path / "data", columns)
    path = tmp_path / "data" / "reward.npy"
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(DatasetError, match=f"dataset file {path} does not match its SHA-256"):
        Dataset.open(tmp_path / "data")


def test_an_edited_manifest_is_refused(tmp_path, columns):
    write(tmp_path / "data", columns)
    manifest = tmp_path / "data" / "manifest.json"
    data = json.loads(manifest.read_text())
    data["episodes"]["return_mean"] = 1e6
    manifest.write_text(json.dumps(data))
    with pytest.raises(DatasetError, match="does not match its seal"):
        Dataset.open(tmp_path / "data")


def test_what_is_not_a_dataset_is_named(tmp_path):
    with pytest.raises(DatasetError, match="does not exist"):
        Dataset.open(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetError, match=r"is not an rlpipe dataset: it has no manifest\.json"):
        Dataset.open(tmp_path / "empty")


def test_empty_and_misshapen_columns_are_refused_naming_the_column(tmp_path, columns):
    with pytest.raises(DatasetError, match="the dataset is empty"):
        write(tmp_path / "a", {name: values[:0] for name, values in columns.items()})
    with pytest.raises(DatasetError, match=r"dataset column 'next_obs' has shape \(120, 4\), expected \(120, 3\)"):
        write(tmp_path / "b", {**columns, "next_obs": np.zeros((120, 4), np.float32)})
    with pytest.raises(DatasetError, match="a dataset needs column 'env_id'"):
        write(tmp_path / "c", {k: v for k, v in columns.items() if k != "env_id"})
    assert not list(tmp_path.iterdir())


def test_an_existing_dataset_is_kept_unless_overwritten_and_a_failed_write_leaves_nothing(tmp_path, columns,
                                                                                         monkeypatch):
    first = write(tmp_path / "data", columns)
    with pytest.raises(DatasetError, match="already exists"):
        write(tmp_path / "data", columns)

    calls = []

    def failing_save(file, values, allow_pickle=False):  # a disk that fills up at the third column
        calls.append(file)
        if len(calls) == 3:
            raise OSError("No space left on device")
        return original(file, values, allow_pickle=allow_pickle)

    original = np.save
    monkeypatch.setattr(np, "save", failing_save)
    with pytest.raises(OSError):
        write(tmp_path / "data", interleaved_columns(seed=1), overwrite=True)
    monkeypatch.undo()
    assert Dataset.open(tmp_path / "data").seal == first.seal  # the earlier dataset is untouched
    assert [p.name for p in tmp_path.iterdir()] == ["data"]  # and no half-written directory is left
