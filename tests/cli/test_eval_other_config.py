"""``rlpipe eval RUN --checkpoint PATH`` with a checkpoint of another preset or other network sizes
is evaluated with the checkpoint's own config (one warning line), or, when the checkpoint carries
none, refused in one line: never torch's size-mismatch traceback."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import rlpipe
from rlpipe.cli.main import main
from rlpipe.utils.checkpoint import CheckpointError, read_checkpoint, save_checkpoint
from tests.cli_errors import one_line_error
from tests.tiny_run import TINY_RUN

TINY = [*TINY_RUN, "run.save_freq=100000"]
OTHERS = {"pendulum-sac": ["pendulum-sac", "policy.random_collect_size=100"],
          "wider": ["cartpole-dqn", "policy.model.encoder_hidden_size_list=[32]"]}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("others")
    for name, (preset, *overrides) in {"cartpole": ["cartpole-dqn"], **OTHERS}.items():
        assert main(["train", preset, *TINY, *overrides, "--run-dir", str(root / name)]) == 0
    return {name: root / name for name in ["cartpole", *OTHERS]}


@pytest.mark.parametrize("other", sorted(OTHERS))
def test_a_checkpoint_of_another_config_is_evaluated_with_its_own(runs, other, capsys, caplog):
    checkpoint = runs[other] / "ckpt" / "final.pth.tar"
    assert main(["eval", str(runs["cartpole"]), "--checkpoint", str(checkpoint), "--episodes", "2"]) == 0
    assert json.loads(capsys.readouterr().out)["episodes"] == 2
    own = "sac, env Pendulum-v1" if other == "pendulum-sac" else "dqn, env CartPole-v1"
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [
        f"checkpoint {checkpoint} was saved by a run of another config (policy.type {own}, other network sizes or "
        "env): evaluated with its own config"]


def test_a_checkpoint_of_the_run_itself_is_evaluated_with_the_run_config(runs, capsys, caplog):
    assert main(["eval", str(runs["cartpole"]), "--checkpoint", "final", "--episodes", "2"]) == 0
    assert not [r for r in caplog.records if r.levelname == "WARNING"]


def test_a_checkpoint_that_does_not_fit_and_carries_no_config_is_refused_in_one_line(runs, tmp_path, capsys):
    state, header = read_checkpoint(runs["wider"] / "ckpt" / "final.pth.tar")
    del state["config"]  # as checkpoints were before they carried their config
    bare = save_checkpoint(state, tmp_path / "ckpt" / "wider.pth.tar", header.run_id)
    err = one_line_error(capsys, ["eval", str(runs["cartpole"]), "--checkpoint", str(bare), "--episodes", "1"])
    assert err.startswith(f"rlpipe eval: error: checkpoint {bare} does not fit the config it is loaded with "
                          "(policy.type dqn, env CartPole-v1): Error(s) in loading state_dict")
    assert "size mismatch" in err
    foreign = save_checkpoint(state, runs["cartpole"] / "ckpt" / "foreign.pth.tar", header.run_id)
    try:
        with pytest.raises(CheckpointError, match="does not fit the config it is loaded with") as info:
            rlpipe.load(foreign)  # no config of its own: the config.yaml of the run it sits in
        assert "\n" not in str(info.value)
    finally:
        foreign.unlink()
