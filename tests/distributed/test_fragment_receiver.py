"""The learner's side of the Ray backend, without Ray: ``fragment_receiver`` counts each fragment's env
steps and tells the learners to wait while the run's random warm-up is still arriving in pieces."""
from __future__ import annotations

import numpy as np

from rlpipe.distributed import Fragment, fragment_receiver
from rlpipe.framework import OnlineRLContext


class ScriptedCollectors:
    """What ``fragment_receiver`` needs of ``RayCollectors``: fragments of ``env_steps`` each, in turn."""

    def __init__(self, env_steps: list[int]) -> None:
        self._fragments = iter([
            Fragment(collector=i % 2, sequence=i // 2, policy_version=0, env_steps=n, env_episodes=0,
                     transitions={"reward": np.zeros(n, dtype=np.float32)}, episode_stats={}, eps=None)
            for i, n in enumerate(env_steps)
        ])

    def request(self, env_step: int, train_iter: int) -> None:
        pass

    def receive(self, train_iter: int) -> Fragment:
        return next(self._fragments)

    def stats(self) -> dict[str, float]:
        return {}


def test_the_learners_wait_until_the_warm_up_pieces_reach_random_collect_size():
    receive = fragment_receiver(ScriptedCollectors([400, 400, 400, 400]), random_collect_size=1000)
    ctx, seen = OnlineRLContext(), []
    for _ in range(4):
        iteration = receive(ctx)
        next(iteration)  # the part before the learner
        seen.append((ctx.env_step, ctx.warming_up))
        iteration.close()
        ctx.warming_up = False  # a per-iteration field: a new iteration starts without it
    assert seen == [(400, True), (800, True), (1200, False), (1600, False)]
