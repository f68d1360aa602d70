from __future__ import annotations

import pytest
import torch

from rlpipe.utils.checkpoint import CheckpointError, load_checkpoint, save_checkpoint


def test_round_trip_and_atomic_replace(tmp_path):
    path = tmp_path / "c" / "x.pth.tar"
    save_checkpoint({"policy": {"w": torch.ones(2)}, "counters": {"env_step": 3}}, path)
    save_checkpoint({"policy": {"w": torch.zeros(2)}, "counters": {"env_step": 4}}, path)
    state = load_checkpoint(path)
    assert torch.equal(state["policy"]["w"], torch.zeros(2)) and state["counters"]["env_step"] == 4
    assert [p.name for p in path.parent.iterdir()] == ["x.pth.tar"]  # no temp files left


def test_failed_save_keeps_previous_file(tmp_path):
    path = tmp_path / "x.pth.tar"
    save_checkpoint({"policy": {"w": torch.ones(1)}}, path)
    with pytest.raises((AttributeError, TypeError, RuntimeError)):
        save_checkpoint({"policy": lambda: None}, path)  # a lambda cannot be pickled
    assert torch.equal(load_checkpoint(path)["policy"]["w"], torch.ones(1))
    assert len(list(tmp_path.iterdir())) == 1


def test_missing_corrupt_and_foreign_files_fail_in_one_line(tmp_path):
    with pytest.raises(CheckpointError, match="checkpoint not found"):
        load_checkpoint(tmp_path / "none.pth.tar")
    corrupt = tmp_path / "corrupt.pth.tar"
    corrupt.write_bytes(b"not a checkpoint at all")
    with pytest.raises(CheckpointError, match="is corrupt or not a checkpoint") as info:
        load_checkpoint(corrupt)
    assert "\n" not in str(info.value)
    foreign = tmp_path / "foreign.pth.tar"
    torch.save({"weights": torch.ones(1)}, foreign)
    with pytest.raises(CheckpointError, match=r"lacks the entries \['policy'\]"):
        load_checkpoint(foreign)


def test_code_in_a_checkpoint_is_not_executed(tmp_path):
    class Evil:
        def __reduce__(self):
            return (print, ("executed!",))

    path = tmp_path / "evil.pth.tar"
    torch.save({"policy": Evil()}, path)
    with pytest.raises(CheckpointError, match="corrupt or not a checkpoint"):
        load_checkpoint(path)
