"""A run whose only checkpoint is ``final.*`` (no periodic save) is resumed and crashes at each
point of its new final save, including between the new buffer and the new checkpoint: ``rlpipe
resume`` continues every one, from the old unit or the new one, with every transition."""
from __future__ import annotations

import contextlib
import json
import shutil

from rlpipe.cli.main import main
from rlpipe.data import DequeBuffer
from rlpipe.framework.middleware import CkptSaver
from rlpipe.utils.checkpoint import load_checkpoint, read_checkpoint, save_checkpoint
from tests.crash_points import Crash, CrashPoints
from tests.run_checks import saved_buffer
from tests.tiny_run import TINY_RUN

TINY = [*TINY_RUN, "run.save_freq=100000"]  # final.pth.tar is the run's only unit


def test_a_crash_at_any_point_of_the_final_save_resumes(tmp_path, monkeypatch, capsys):
    first = tmp_path / "first"
    assert main(["train", "cartpole-dqn", *TINY, "--run-dir", str(first)]) == 0
    before = load_checkpoint(first / "ckpt" / "final.pth.tar")["counters"]["env_step"]
    save = CkptSaver._save
    at = 0
    while True:
        run = tmp_path / f"crash-{at}"
        shutil.copytree(first, run)
        with monkeypatch.context() as patch:
            crash = CrashPoints(patch, at)

            def final_save_with_crash(self, ctx, name, with_buffer, crash=crash):
                crash.armed = name == "final.pth.tar"
                try:
                    save(self, ctx, name, with_buffer)
                finally:
                    crash.armed = False

            patch.setattr(CkptSaver, "_save", final_save_with_crash)
            with contextlib.suppress(Crash):  # a crash in the final save, or none once past the last point
                main(["resume", str(run), "run.max_env_step=400", "--no-progress"])
        capsys.readouterr()
        final = run / "ckpt" / "final.pth.tar"
        resumed_from = load_checkpoint(final)["counters"]["env_step"]
        assert resumed_from == before or resumed_from >= 400  # the old unit, or the new one once complete
        assert main(["resume", str(run), "run.max_env_step=600", "--no-progress"]) == 0
        summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert summary["env_step"] >= 600
        buffer = DequeBuffer(size=20000)
        buffer.load_data(str(saved_buffer(final)))
        assert buffer.count() == summary["env_step"]  # every transition, none twice
        assert not [p for p in run.rglob("*") if p.name.startswith(".") or p.name.endswith((".tmp", ".pending"))]
        assert len(list((run / "ckpt").glob("*.buffer.npz"))) == 1
        if not crash.crashed:
            break
        at += 1
    assert at == 8  # before and after the buffer's two renames, the checkpoint's, the old buffer's deletion


def test_a_run_dir_of_the_older_layout_resumes(tmp_path):
    """NAME.buffer.npz beside NAME.pth.tar, as runs were saved before buffers were named in the header."""
    run = tmp_path / "run"
    assert main(["train", "cartpole-dqn", *TINY, "--run-dir", str(run)]) == 0
    final = run / "ckpt" / "final.pth.tar"
    state, header = read_checkpoint(final)
    legacy = saved_buffer(final).rename(final.with_name("final.buffer.npz"))
    save_checkpoint(state, final, header.run_id, header.buffer_sha256)  # the header names no buffer file
    assert saved_buffer(final) == legacy
    assert main(["resume", str(run), "run.max_env_step=600", "--no-progress"]) == 0
    assert not legacy.exists()  # gone once the resumed run's unit was complete
    assert saved_buffer(final).name.startswith("final.") and saved_buffer(final) != legacy
