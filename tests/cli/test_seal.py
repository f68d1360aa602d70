"""The seal cannot be stripped: a checkpoint whose weights were changed and saved back as a bare
``torch.save`` file is refused by ``rlpipe eval`` and ``rlpipe resume`` (with and without
``RLPIPE_CHECKPOINT_KEY``), loads only with ``--allow-unsealed`` (one warning line), and a run
that writes signed checkpoints refuses a file sealed with the plain SHA-256 anyone can compute."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import rlpipe
from rlpipe.cli.main import main
from rlpipe.utils.checkpoint import RUN_RECORD, CheckpointError, load_checkpoint, save_checkpoint
from rlpipe.utils.integrity import KEY_ENV, KEYED, PLAIN
from tests.cli_errors import one_line_error
from tests.run_checks import saved_buffer, snapshot
from tests.tiny_run import TINY_RUN

REPO = Path(__file__).resolve().parents[2]
TINY = [*TINY_RUN, "run.save_freq=1000"]
KEYS = {"plain": None, "keyed": "a secret"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """A finished tiny run written without the key, and one written with it."""
    root = tmp_path_factory.mktemp("seal")
    for name, key in KEYS.items():
        with pytest.MonkeyPatch.context() as patch:
            if key is not None:
                patch.setenv(KEY_ENV, key)
            assert main(["train", "cartpole-dqn", *TINY, "--run-dir", str(root / name)]) == 0
    return {name: root / name for name in KEYS}


@pytest.fixture(params=sorted(KEYS))
def run(request, runs, tmp_path, monkeypatch) -> Path:
    """A copy of one of the runs, with the key set as it was when the run was written."""
    monkeypatch.delenv(KEY_ENV, raising=False)
    if KEYS[request.param] is not None:
        monkeypatch.setenv(KEY_ENV, KEYS[request.param])
    copy = tmp_path / "run"
    shutil.copytree(runs[request.param], copy)
    return copy


def _changed(value):
    """``value`` with 1 added to every float tensor in it."""
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value + 1
    if isinstance(value, dict):
        return {key: _changed(item) for key, item in value.items()}
    return value


def strip_the_seal(run: Path) -> Path:
    """Change final.pth.tar's weights and write it back with torch.save (no seal); its buffer
    gets the name an unsealed checkpoint's buffer has (NAME.buffer.npz, as before the seal)."""
    final = run / "ckpt" / "final.pth.tar"
    buffer = saved_buffer(final)
    state = load_checkpoint(final)
    torch.save({**state, "policy": _changed(state["policy"])}, final)
    buffer.rename(final.with_name("final.buffer.npz"))
    return final


def test_the_run_records_how_its_checkpoints_are_sealed(runs):
    for name, key in KEYS.items():
        record = json.loads((runs[name] / RUN_RECORD).read_text())
        assert record == {"checkpoint_seal": PLAIN if key is None else KEYED}


def test_a_stripped_seal_is_refused_by_eval_and_resume(run, capsys):
    final = strip_the_seal(run)
    before = snapshot(run)
    for argv in (["eval", str(run), "--checkpoint", "final", "--episodes", "1"],
                 ["eval", str(run), "--checkpoint", str(final), "--episodes", "1"],
                 ["resume", str(run), "run.max_env_step=400"]):
        err = one_line_error(capsys, argv)
        assert f"checkpoint {final} is not sealed (a bare torch.save file), so nothing shows it was not changed" in err
        assert err.endswith("a genuine checkpoint from before the seal loads with --allow-unsealed "
                            "(allow_unsealed=True)")
        assert (f"({KEY_ENV} is set: only files signed with it are trusted)" in err) == (KEY_ENV in os.environ)
    assert snapshot(run) == before


def test_a_stripped_seal_loads_with_the_flag_and_one_warning(run, capsys, caplog):
    final = strip_the_seal(run)
    warning = (f"checkpoint {final} is not sealed: loaded unverified as --allow-unsealed (allow_unsealed=True) "
               "asks: its contents, the run it belongs to and the buffer file loaded with it are not checked")
    assert main(["eval", str(run), "--checkpoint", "final", "--episodes", "1", "--allow-unsealed"]) == 0
    assert json.loads(capsys.readouterr().out)["episodes"] == 1
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [warning]
    caplog.clear()
    assert main(["resume", str(run), "run.max_env_step=400", "--allow-unsealed"]) == 0
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [warning]
    resumed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert resumed["env_step"] >= 400
    assert load_checkpoint(final)["counters"]["env_step"] == resumed["env_step"]  # sealed again by the resumed run


def test_an_unsealed_checkpoint_cannot_bring_in_a_buffer(run, capsys):
    """A forged unit (an unsealed checkpoint with more train iterations, a buffer beside it) does not
    outrank the sealed one: resume refuses to start at all."""
    final = run / "ckpt" / "final.pth.tar"
    state = load_checkpoint(final)
    forged = run / "ckpt" / "iteration_999.pth.tar"
    torch.save({**state, "counters": {**state["counters"], "train_iter": 999}}, forged)
    shutil.copy(saved_buffer(final), forged.with_name("iteration_999.buffer.npz"))
    err = one_line_error(capsys, ["resume", str(run), "run.max_env_step=400"])
    assert f"checkpoint {forged} is not sealed" in err


def test_a_plain_seal_in_a_signed_run_is_refused(runs, tmp_path, monkeypatch, capsys):
    run = tmp_path / "run"
    shutil.copytree(runs["keyed"], run)
    final = run / "ckpt" / "final.pth.tar"
    monkeypatch.setenv(KEY_ENV, KEYS["keyed"])
    state = load_checkpoint(final)
    monkeypatch.delenv(KEY_ENV)
    save_checkpoint({**state, "policy": _changed(state["policy"])}, final)  # sealed, but with SHA-256 alone
    err = one_line_error(capsys, ["eval", str(run), "--checkpoint", "final", "--episodes", "1"])
    assert err == (f"rlpipe eval: error: checkpoint {final} is sealed with sha256, but its run's run.json says the "
                   "run writes hmac-sha256 checkpoints: it was not written with the run's key")
    flagged = one_line_error(capsys, ["eval", str(run), "--checkpoint", "final", "--allow-unsealed"])
    assert flagged == err  # the flag is for files without a seal, not for a weaker one
    monkeypatch.setenv(KEY_ENV, KEYS["keyed"])
    for argv in (["eval", str(run), "--checkpoint", "final"], ["resume", str(run)]):
        assert f"checkpoint {final} is not signed but {KEY_ENV} is set" in one_line_error(capsys, argv)


def test_the_console_script_refuses_a_stripped_seal_and_takes_the_flag(runs, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(runs["plain"], run)
    final = strip_the_seal(run)
    script = Path(sys.executable).parent / "rlpipe"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop(KEY_ENV, None)

    def rlpipe(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(script), *argv], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)

    for argv in (["eval", str(run), "--checkpoint", "final", "--episodes", "1"], ["resume", str(run), "--no-progress"]):
        refused = rlpipe(*argv)
        assert refused.returncode == 2
        assert refused.stderr.strip().splitlines() == [
            f"rlpipe {argv[0]}: error: checkpoint {final} is not sealed (a bare torch.save file), so nothing shows "
            "it was not changed; a genuine checkpoint from before the seal loads with --allow-unsealed "
            "(allow_unsealed=True)"]
    accepted = rlpipe("eval", str(run), "--checkpoint", "final", "--episodes", "1", "--allow-unsealed")
    assert accepted.returncode == 0 and json.loads(accepted.stdout)["episodes"] == 1
    assert accepted.stderr.strip().splitlines() == [
        f"WARNING rlpipe.utils.checkpoint: checkpoint {final} is not sealed: loaded unverified as --allow-unsealed "
        "(allow_unsealed=True) asks: its contents, the run it belongs to and the buffer file loaded with it are "
        "not checked"]


def test_the_python_api_takes_allow_unsealed(run, caplog):
    final = strip_the_seal(run)
    with pytest.raises(CheckpointError, match="is not sealed"):
        rlpipe.load(final)
    assert rlpipe.load(final, allow_unsealed=True).predict([0.0, 0.0, 0.0, 0.0]) in (0, 1)
    with pytest.raises(CheckpointError, match="is not sealed"):
        rlpipe.train(run / "config.yaml", run, resume=True, overrides=["run.max_env_step=400"])
    summary = rlpipe.train(run / "config.yaml", run, resume=True, overrides=["run.max_env_step=400"],
                           allow_unsealed=True)
    assert summary.env_step >= 400
    assert sum("is not sealed: loaded unverified" in r.getMessage() for r in caplog.records) == 2
