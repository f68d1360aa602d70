"""Learner throughput: rlpipe's OffPolicyLearner vs a minimal hand-written PyTorch loop.

Both train the same double-DQN Huber loss (batch 64, MLP 64x64, CartPole-shaped data:
obs 4, 2 actions, gradient clipping, the same fused Adam) on the same stored transitions,
in one process, on one torch thread. The rlpipe side goes through the full path:
``DequeBuffer.sample_batch`` -> fetcher middleware -> trainer middleware ->
``DQNPolicy.learn_mode.forward`` (which also returns loss, mean Q and per-sample
priorities). The baseline samples numpy ring arrays with ``Generator.integers`` and inlines
the update. Rounds of the runners alternate so that machine noise hits all alike; the best
round of each is reported (as ``timeit`` advises: slower rounds measure other load on the
machine, not the code).

``learner_ratio`` (the headline) compares with the bare hand loop, which does less: it
samples with replacement (rlpipe's buffer, like the seed's, samples without) and computes
no metrics. ``learner_vs_hand_metrics_ratio`` compares with the same hand loop that also
computes, each step, what ``learn_mode.forward`` must return (loss as a float, mean Q,
``|td_error|`` per sample) the way ``DQNPolicy`` computes them, so it isolates the cost of
the framework path (buffer, fetcher, trainer, learner) from the cost of those outputs.

Usage: ``python benchmarks/learner.py [--quick]``. The last line printed is JSON.
"""

from __future__ import annotations

import argparse
import copy
import json
import time

import numpy as np
import torch
from torch import nn

from rlpipe.config import load_config
from rlpipe.data import DequeBuffer
from rlpipe.framework.context import OnlineRLContext
from rlpipe.framework.middleware import OffPolicyLearner
from rlpipe.policy import DQNPolicy
from rlpipe.policy.optim import make_adam

OBS_SIZE, N_ACTIONS, BATCH_SIZE, HIDDEN = 4, 2, 64, [64, 64]
UPDATE_PER_COLLECT = 10


def make_data(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    """``n`` random CartPole-shaped transitions as a columnar batch."""
    rng = np.random.default_rng(seed)
    return {
        "obs": rng.normal(size=(n, OBS_SIZE)).astype(np.float32),
        "next_obs": rng.normal(size=(n, OBS_SIZE)).astype(np.float32),
        "action": rng.integers(N_ACTIONS, size=n).astype(np.int64),
        "reward": np.ones(n, dtype=np.float32),
        "terminated": rng.random(n) < 0.05,
        "truncated": rng.random(n) < 0.01,
    }


class RlpipeRunner:
    """The framework path: buffer + OffPolicyLearner + a policy (DQNPolicy by default).

    ``benchmarks/sac.py`` runs SAC, TD3 and CrossQ through it too.
    """

    def __init__(self, cfg, data: dict[str, np.ndarray], policy_class: type = DQNPolicy) -> None:
        torch.manual_seed(0)
        self.policy = policy_class(cfg.policy, seed=0)
        self.buffer = DequeBuffer(size=len(data["obs"]), seed=0)
        self.buffer.push_batch(data)
        self.ctx = OnlineRLContext()
        self.learner = OffPolicyLearner(cfg, self.policy.learn_mode, self.buffer)

    def run(self, n_updates: int) -> int:
        done = 0
        while done < n_updates:
            self.learner(self.ctx)
            done += len(self.ctx.train_output)
        return done


class HandwrittenRunner:
    """What one would write by hand: ring arrays, as_tensor, the loss inline, Adam.

    With ``metrics`` each step also computes the outputs ``DQNPolicy`` returns, as it does.
    """

    def __init__(self, cfg, data: dict[str, np.ndarray], metrics: bool = False) -> None:
        self.metrics = metrics
        torch.manual_seed(0)
        layers: list[nn.Module] = []
        in_size = OBS_SIZE
        for size in HIDDEN:
            layers += [nn.Linear(in_size, size), nn.ReLU()]
            in_size = size
        self.q_network = nn.Sequential(*layers, nn.Linear(in_size, N_ACTIONS))
        self.target_network = copy.deepcopy(self.q_network)
        learn = cfg.policy.learn
        self.optimizer = make_adam(self.q_network.parameters(), learn.learning_rate)
        self.gamma = cfg.policy.discount_factor
        self.grad_clip = learn.grad_clip
        self.target_update_freq = learn.target_update_freq
        self.columns = {k: v.copy() for k, v in data.items()}
        self.size = len(data["obs"])
        self.rng = np.random.default_rng(0)
        self.step = 0

    def run(self, n_updates: int) -> int:
        c = self.columns
        for _ in range(n_updates):
            idx = self.rng.integers(self.size, size=BATCH_SIZE)
            obs = torch.as_tensor(c["obs"][idx])
            next_obs = torch.as_tensor(c["next_obs"][idx])
            action = torch.as_tensor(c["action"][idx])
            reward = torch.as_tensor(c["reward"][idx])
            terminated = torch.as_tensor(c["terminated"][idx]).float()
            with torch.no_grad():
                next_action = self.q_network(next_obs).argmax(dim=1, keepdim=True)
                q_next = self.target_network(next_obs).gather(1, next_action).squeeze(1)
                td_target = reward + self.gamma * (1.0 - terminated) * q_next
            q = self.q_network(obs)
            q_sa = q.gather(1, action.unsqueeze(1)).squeeze(1)
            loss = nn.functional.smooth_l1_loss(q_sa, td_target)
            self.optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(self.q_network.parameters(), self.grad_clip)
            self.optimizer.step()
            self.step += 1
            if self.step % self.target_update_freq == 0:
                self.target_network.load_state_dict(self.q_network.state_dict())
            if self.metrics:
                self.last_output = {
                    "total_loss": loss.item(),
                    "q_value": float(q.detach().cpu().numpy().mean()),
                    "priority": np.abs((td_target - q_sa.detach()).cpu().numpy()),
                }
        return n_updates


def timed(runner, n_updates: int) -> float:
    """Updates per second of one round."""
    start = time.perf_counter()
    done = runner.run(n_updates)
    return done / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny run (a few hundred updates)")
    args = parser.parse_args()
    rounds, per_round, warmup = (3, 100, 20) if args.quick else (15, 400, 200)
    # One intra-op thread for both sides: batch-64 matmuls gain nothing from more, and on a
    # busy machine OpenMP barriers between threads dominate (and add noise to) the timings.
    torch.set_num_threads(1)

    cfg = load_config(
        {
            "policy": {
                "model": {
                    "obs_shape": OBS_SIZE,
                    "action_shape": N_ACTIONS,
                    "encoder_hidden_size_list": HIDDEN,
                },
                "learn": {"batch_size": BATCH_SIZE, "update_per_collect": UPDATE_PER_COLLECT},
            }
        }
    )
    data = make_data(10_000)
    rlpipe_runner = RlpipeRunner(cfg, data)
    runners = {
        "rlpipe": rlpipe_runner,
        "hand": HandwrittenRunner(cfg, data),
        "hand_metrics": HandwrittenRunner(cfg, data, metrics=True),
    }
    for runner in runners.values():
        runner.run(warmup)
    rates: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(rounds):
        for name, runner in runners.items():
            rates[name].append(timed(runner, per_round))

    best = {name: max(values) for name, values in rates.items()}
    ratio = best["rlpipe"] / best["hand"]
    print(f"rlpipe OffPolicyLearner:        {best['rlpipe']:8.0f} updates/s")
    print(f"hand-written loop:              {best['hand']:8.0f} updates/s")
    print(f"hand-written loop with metrics: {best['hand_metrics']:8.0f} updates/s")
    print(f"ratio:                          {ratio:8.3f} (target >= 0.9)")
    print(
        json.dumps(
            {
                "rlpipe_updates_per_s": round(best["rlpipe"], 1),
                "handwritten_updates_per_s": round(best["hand"], 1),
                "handwritten_metrics_updates_per_s": round(best["hand_metrics"], 1),
                "learner_ratio": round(ratio, 4),
                "learner_vs_hand_metrics_ratio": round(best["rlpipe"] / best["hand_metrics"], 4),
            }
        )
    )


if __name__ == "__main__":
    main()
