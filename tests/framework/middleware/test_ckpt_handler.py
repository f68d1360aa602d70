from __future__ import annotations

import pytest
import torch

from rlpipe.framework import OnlineRLContext
from rlpipe.framework.middleware import CkptSaver, SaveSettings
from rlpipe.utils.checkpoint import load_checkpoint


class TinyPolicy:
    def __init__(self):
        self.net = torch.nn.Linear(2, 1)

    def state_dict(self):
        return {"net": self.net.state_dict()}


def test_saves_periodically_on_best_eval_and_at_finish(tmp_path):
    policy = TinyPolicy()
    saver = CkptSaver(policy, tmp_path, train_freq=10)
    ctx = OnlineRLContext()
    ctx.train_iter, ctx.eval_value = 5, 1.0
    saver(ctx)
    ckpt = tmp_path / "ckpt"
    assert sorted(p.name for p in ckpt.iterdir()) == ["eval.pth.tar"]
    ctx.train_iter, ctx.eval_value, ctx.env_step = 10, 0.5, 99
    saver(ctx)
    assert (ckpt / "iteration_10.pth.tar").exists()
    assert load_checkpoint(ckpt / "eval.pth.tar")["counters"]["train_iter"] == 5  # 0.5 is not better
    ctx.finish = True
    saver(ctx)
    final = load_checkpoint(ckpt / "final.pth.tar")
    assert final["counters"]["env_step"] == 99
    assert torch.equal(final["policy"]["net"]["weight"], policy.net.weight)


def test_best_of_an_earlier_run_in_the_same_directory_is_kept(tmp_path):
    policy = TinyPolicy()
    ctx = OnlineRLContext()
    ctx.train_iter, ctx.eval_value, ctx.last_eval_value = 1, 5.0, 5.0
    CkptSaver(policy, tmp_path)(ctx)
    later = CkptSaver(policy, tmp_path)  # e.g. a resumed run
    ctx.train_iter, ctx.eval_value, ctx.last_eval_value = 2, 3.0, 3.0
    later(ctx)
    assert load_checkpoint(tmp_path / "ckpt" / "eval.pth.tar")["counters"]["train_iter"] == 1


def test_checkpoint_restores_counters_and_torch_rng(tmp_path):
    from rlpipe.framework.middleware import checkpoint_state, restore_checkpoint

    policy = TinyPolicy()
    policy.load_state_dict = lambda state: policy.net.load_state_dict(state["net"])
    ctx = OnlineRLContext()
    ctx.env_step, ctx.train_iter = 123, 45
    state = checkpoint_state(policy, ctx)
    expected = torch.rand(3)  # advances the generator past the saved state
    fresh = OnlineRLContext()
    restore_checkpoint(state, policy, fresh)
    assert (fresh.env_step, fresh.train_iter) == (123, 45)
    assert torch.equal(torch.rand(3), expected)


def test_the_env_step_of_the_last_evaluation_is_restored_and_older_checkpoints_lack_it():
    from rlpipe.framework.middleware import checkpoint_state, restore_checkpoint

    policy = TinyPolicy()
    policy.load_state_dict = lambda state: policy.net.load_state_dict(state["net"])
    ctx = OnlineRLContext()
    ctx.env_step, ctx.last_eval_env_step = 500, 480
    state = checkpoint_state(policy, ctx)
    fresh = OnlineRLContext()
    restore_checkpoint(state, policy, fresh)
    assert fresh.last_eval_env_step == 480
    del state["counters"]["last_eval_env_step"]  # as a checkpoint of an older release
    older = OnlineRLContext()
    restore_checkpoint(state, policy, older)
    assert (older.env_step, older.last_eval_env_step) == (500, -1)


def test_latest_checkpoint_is_the_newest_complete_unit(tmp_path):
    from rlpipe.framework.middleware import buffer_file, latest_checkpoint
    from rlpipe.utils.checkpoint import CheckpointError, save_checkpoint
    from rlpipe.utils.integrity import file_sha256

    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()

    def fake(name, train_iter, with_buffer):
        path = ckpt / name
        digest = None
        if with_buffer:
            buffer_file(path).write_bytes(f"buffer at {train_iter}".encode())  # written first, as CkptSaver does
            digest = file_sha256(buffer_file(path))
        state = {"policy": {}, "counters": {"train_iter": train_iter}, "torch_rng": torch.get_rng_state()}
        save_checkpoint(state, path, buffer_sha256=digest)
        return path

    fake("final.pth.tar", 20, with_buffer=False)  # an earlier run's end; its buffer was superseded
    with pytest.raises(CheckpointError, match="nothing to resume"):
        latest_checkpoint(tmp_path)
    newer = fake("iteration_30.pth.tar", 30, with_buffer=True)
    assert latest_checkpoint(tmp_path).path == newer
    fake("iteration_10.pth.tar", 10, with_buffer=True)
    assert latest_checkpoint(tmp_path).path == newer
    buffer_file(newer).write_bytes(b"a buffer written after the checkpoint, then a crash")
    assert latest_checkpoint(tmp_path).path == ckpt / "iteration_10.pth.tar"  # the newest complete unit
    buffer_file(ckpt / "iteration_10.pth.tar").unlink()
    with pytest.raises(CheckpointError, match=r"buffer file .*iteration_30.buffer.npz does not match checkpoint "):
        latest_checkpoint(tmp_path)


def test_only_the_newest_buffer_copy_is_kept(tmp_path):
    from rlpipe.data import DequeBuffer

    buffer = DequeBuffer(size=4)
    buffer.push({"x": 1})
    saver = CkptSaver(TinyPolicy(), tmp_path, train_freq=1, settings=SaveSettings(buffer_=buffer))
    ctx = OnlineRLContext()
    for it in (1, 2):
        ctx.train_iter = it
        saver(ctx)
    from rlpipe.framework.middleware import buffer_file
    from rlpipe.utils.checkpoint import read_header

    newest = tmp_path / "ckpt" / "iteration_2.pth.tar"
    named = buffer_file(newest, read_header(newest))
    assert named.name.startswith("iteration_2.") and named.name.endswith(".buffer.npz")
    assert sorted((tmp_path / "ckpt").glob("*.npz")) == [named]


def test_keep_last_deletes_older_periodic_checkpoints_and_nothing_else(tmp_path):
    from rlpipe.data import DequeBuffer

    buffer = DequeBuffer(size=4)
    buffer.push({"x": 1})
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "iteration_old.pth.tar").write_bytes(b"not ours")  # not a periodic checkpoint name
    saver = CkptSaver(TinyPolicy(), tmp_path, train_freq=1, settings=SaveSettings(buffer_=buffer, keep_last=2))
    ctx = OnlineRLContext()
    for it in (8, 9, 10, 11):  # 10 after 9: sorted by number, not by name
        ctx.train_iter, ctx.eval_value = it, float(it)
        saver(ctx)
    assert sorted(p.name.split(".")[0] if p.name.endswith(".buffer.npz") else p.name for p in ckpt.iterdir()) == [
        "eval.pth.tar",
        "iteration_10.pth.tar",
        "iteration_11",  # iteration_11.DIGEST.buffer.npz
        "iteration_11.pth.tar",
        "iteration_old.pth.tar",
    ]
    with pytest.raises(ValueError, match="keep_last must be >= 1"):
        CkptSaver(TinyPolicy(), tmp_path, settings=SaveSettings(keep_last=0))
