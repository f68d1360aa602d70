from __future__ import annotations

import numpy as np
import pytest
import torch

from rlpipe.utils.checkpoint import MAGIC, CheckpointError, load_checkpoint, read_checkpoint, save_checkpoint
from rlpipe.utils.integrity import KEY_ENV


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
    with pytest.raises(CheckpointError, match="is damaged or not an rlpipe checkpoint") as info:
        load_checkpoint(corrupt)
    assert "\n" not in str(info.value)
    foreign = tmp_path / "foreign.pth.tar"
    torch.save({"weights": torch.ones(1)}, foreign)
    with pytest.raises(CheckpointError, match=r"lacks the entries \['policy'\]"):
        load_checkpoint(foreign, allow_unsealed=True)


def test_code_in_a_checkpoint_is_not_executed(tmp_path):
    class Evil:
        def __reduce__(self):
            return (print, ("executed!",))

    path = tmp_path / "evil.pth.tar"
    torch.save({"policy": Evil()}, path)  # unsealed (as before the seal): allowed, torch gets to read it
    with pytest.raises(CheckpointError, match="corrupt or not a checkpoint"):
        load_checkpoint(path, allow_unsealed=True)


def saved(tmp_path, **header):
    path = tmp_path / "x.pth.tar"
    state = {"policy": {"w": torch.arange(64, dtype=torch.float32)}, "counters": {"env_step": 7, "train_iter": 3}}
    return save_checkpoint(state, path, **header)


def test_the_header_names_run_moment_and_buffer(tmp_path):
    path = saved(tmp_path, run_id="abc", buffer_sha256="0" * 64)
    assert path.read_bytes().startswith(MAGIC)
    state, header = read_checkpoint(path)
    assert (header.format, header.run_id, header.env_step, header.train_iter, header.buffer_sha256) == (
        2, "abc", 7, 3, "0" * 64)
    assert torch.equal(state["policy"]["w"], torch.arange(64, dtype=torch.float32))


def test_every_single_byte_flip_is_refused_in_one_line(tmp_path):
    path = saved(tmp_path, run_id="abc")
    data = path.read_bytes()
    rng = np.random.default_rng(0)
    for position in rng.choice(len(data), size=100, replace=False):  # 100 flips anywhere in the file
        flipped = bytearray(data)
        flipped[position] ^= 1 << int(rng.integers(8))
        path.write_bytes(bytes(flipped))
        with pytest.raises(CheckpointError) as info:
            load_checkpoint(path)
        assert "\n" not in str(info.value) and str(path) in str(info.value)


def test_truncations_are_refused(tmp_path):
    path = saved(tmp_path)
    data = path.read_bytes()
    for size in (0, 10, len(MAGIC) + 5, len(data) // 2, len(data) - 1):
        path.write_bytes(data[:size])
        with pytest.raises(CheckpointError):
            load_checkpoint(path)


def test_a_newer_format_names_both_versions(tmp_path):
    path = saved(tmp_path)
    path.write_bytes(path.read_bytes().replace(b'"format":2', b'"format":3', 1))
    with pytest.raises(CheckpointError, match="has format 3; this rlpipe reads formats up to 2"):
        load_checkpoint(path)


def test_a_key_turns_the_digest_into_an_hmac(tmp_path, monkeypatch):
    unsigned = saved(tmp_path)
    monkeypatch.setenv(KEY_ENV, "secret")
    with pytest.raises(CheckpointError, match=f"is not signed but {KEY_ENV} is set"):
        load_checkpoint(unsigned)
    signed = saved(tmp_path)
    assert load_checkpoint(signed)["counters"]["env_step"] == 7
    monkeypatch.setenv(KEY_ENV, "another secret")
    with pytest.raises(CheckpointError, match="digest does not match its contents"):
        load_checkpoint(signed)
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(CheckpointError, match=f"it is signed \\(HMAC\\) and {KEY_ENV} is not set"):
        load_checkpoint(signed)


def test_a_checkpoint_from_before_the_seal_loads_only_when_allowed(tmp_path, caplog):
    path = tmp_path / "old.pth.tar"
    torch.save({"policy": {"w": torch.ones(1)}}, path)  # how rlpipe wrote checkpoints before
    with pytest.raises(CheckpointError, match="is not sealed") as info:
        read_checkpoint(path)
    assert "\n" not in str(info.value) and "--allow-unsealed (allow_unsealed=True)" in str(info.value)
    state, header = read_checkpoint(path, allow_unsealed=True)
    assert torch.equal(state["policy"]["w"], torch.ones(1)) and header.format is None and not header.sealed
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warnings == [f"checkpoint {path} is not sealed: loaded unverified as --allow-unsealed "
                        "(allow_unsealed=True) asks: its contents, the run it belongs to and the buffer file "
                        "loaded with it are not checked"]
