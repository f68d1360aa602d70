"""A damaged buffer file, or a checkpoint copied in from another run, is refused by ``rlpipe
resume`` with one line, and nothing on disk changes."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from rlpipe.cli.main import main
from tests.cli_errors import one_line_error
from tests.run_checks import saved_buffer, snapshot
from tests.tiny_run import TINY_RUN

TINY = [*TINY_RUN, "run.save_freq=1000"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("integrity")
    for name in ("a", "b"):  # two runs of the same preset and seed: same shapes, other run ids
        assert main(["train", "cartpole-dqn", *TINY, "--run-dir", str(root / name)]) == 0
    return root / "a", root / "b"


def test_every_flip_of_the_buffer_file_is_refused(runs, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(runs[0], run)
    buffer = saved_buffer(run / "ckpt" / "final.pth.tar")
    data = buffer.read_bytes()
    rng = np.random.default_rng(1)
    for position in rng.choice(len(data), size=30, replace=False):
        flipped = bytearray(data)
        flipped[position] ^= 1 << int(rng.integers(8))
        buffer.write_bytes(bytes(flipped))
        before = snapshot(run)
        err = one_line_error(capsys, ["resume", str(run), "run.max_env_step=400"])
        assert f"buffer file {buffer} does not match checkpoint {run / 'ckpt' / 'final.pth.tar'}" in err
        assert snapshot(run) == before  # config.yaml, summary and checkpoints untouched
    buffer.write_bytes(data[: len(data) // 2])  # truncated
    assert "does not match checkpoint" in one_line_error(capsys, ["resume", str(run), "run.max_env_step=400"])


def test_a_checkpoint_from_another_run_is_refused(runs, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(runs[0], run)
    theirs = runs[1] / "ckpt" / "final.pth.tar"
    for path in (theirs, saved_buffer(theirs)):  # a matching unit, but of run b
        shutil.copy(path, run / "ckpt" / path.name)
    err = one_line_error(capsys, ["resume", str(run), "run.max_env_step=400"])
    assert f"checkpoint {run / 'ckpt' / 'final.pth.tar'} belongs to run " in err
    assert "was it copied from another run?" in err


def test_an_intact_run_resumes(runs, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(runs[0], run)
    assert main(["resume", str(run), "run.max_env_step=400", "--no-progress"]) == 0
