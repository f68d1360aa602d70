from __future__ import annotations

import torch

from rlpipe.framework import OnlineRLContext, task
from rlpipe.framework.middleware import CkptSaver
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
    task.finish = True
    saver(ctx)
    final = load_checkpoint(ckpt / "final.pth.tar")
    assert final["counters"]["env_step"] == 99
    assert torch.equal(final["policy"]["net"]["weight"], policy.net.weight)
