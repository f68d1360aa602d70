"""A random warm-up long enough to reach the buffer in pieces trains the same agent as one taken whole:
nothing trains before its end, and the buffer then holds the same transitions."""
from __future__ import annotations

import torch

from rlpipe.entry import train
from rlpipe.framework.middleware import collector
from rlpipe.utils.checkpoint import load_checkpoint
from rlpipe.utils.metrics import read_metrics
from tests.tiny_run import TINY_RUN

WARM_UP = [*TINY_RUN, "policy.random_collect_size=120", "seed=3"]


def _run(run_dir, monkeypatch, chunk_bytes: int) -> tuple[dict, list[dict]]:
    monkeypatch.setattr(collector, "WARM_UP_CHUNK_BYTES", chunk_bytes)
    train("cartpole-dqn", overrides=WARM_UP, run_dir=run_dir)
    state = load_checkpoint(run_dir / "ckpt" / "final.pth.tar")
    return state["policy"], [r for r in read_metrics(run_dir) if r["kind"] == "train"]


def test_a_warm_up_in_pieces_trains_the_same_agent_as_one_taken_whole(tmp_path, monkeypatch):
    whole, whole_records = _run(tmp_path / "whole", monkeypatch, 2**40)
    pieces, piece_records = _run(tmp_path / "pieces", monkeypatch, 1)  # every collection stops at n_sample
    assert whole_records and piece_records[0]["env_step"] >= 120  # no training before the warm-up ends
    assert [r["train_iter"] for r in piece_records] == [r["train_iter"] for r in whole_records]
    for part in ("model", "target_model"):
        assert whole[part].keys() == pieces[part].keys()
        assert all(torch.equal(whole[part][name], pieces[part][name]) for name in whole[part])
