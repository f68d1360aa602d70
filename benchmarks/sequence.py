"""Sequence replay (R2D2): sampling SequenceBuffer's sequences vs a bare numpy gather of the same bytes,
and R2D2's update vs a hand-written PyTorch R2D2 loop.

Data: POPGym-shaped steps of 16 envs stepped together (obs and next_obs float32 [8], action int64,
reward float32, terminated/truncated bool, env_id int64, core_state float32 [128]); episodes end with
probability 1/200 per step (200 steps on average). ``--steps`` of them fill a SequenceBuffer of that
size (sequences of ``--sequence-len`` steps, stride half of it, uniform sampling).

Measured in this process:

- ``gather``: ``sample_batch(32)`` against the floor, plain numpy arrays of the same columns indexed
  as ``col[starts[:, None] + arange(T)]`` at precomputed random start rows (and ``core_state`` at the
  start rows only, as the buffer returns it): the same bytes, with no draw, no sequence table, no
  episode bounds and no mask. ``gather_ratio`` = floor time / SequenceBuffer time (1.0: no overhead;
  the goal is >= 0.5). ``take_ratio`` does the same against ``col.take(rows, axis=0)``, a stricter
  floor (numpy's ``take`` gathers faster than fancy indexing, and the buffer uses it). They
  alternate in rounds; the best round of each is kept (slower rounds measure other load).
- ``push16_us``: one ``push_batch`` of a vector step (16 rows) into the full buffer (no baseline).
- ``r2d2``: updates/s of ``R2D2Policy.learn_mode.forward`` (the ``popgym-repeatprevious-r2d2``
  preset with obs 8, 4 actions, batch 32, sequences of ``--sequence-len`` rows, burn-in 10, GRU 128,
  5-step returns; its dueling head, double Q, value rescaling, Huber loss, grad clip 40, Adam,
  hard target copies every 1,000 updates, eta 0.9) against :class:`HandR2D2`, the same update
  written out in plain PyTorch. Both take the same batches, drawn before the clock from a pool of
  ``sample_batch(32)`` results of a 20,000-step SequenceBuffer (with padded tails after episode
  ends) plus importance weights, as numpy arrays; both start from the same weights, and their
  first updates' loss, mean Q, priorities and clipped gradients must agree to 1e-3 of rlpipe's
  largest value (checked before the clock; they agree to about 1e-5). One torch thread; rounds of
  ``--r2d2-updates`` updates alternate (even rounds rlpipe first, odd ones the hand loop first) and
  each figure is the median of its ``--r2d2-rounds`` rounds. ``hand_ratio`` = rlpipe's updates/s
  over the hand loop's (the goal is >= 0.9).

  The two do the same network work: the burn-in rows without gradient and the learned rows with
  it (the head's values of the burn-in rows computed and dropped on both sides), the target
  network over the whole sequence (its values dropped too), one single-step pass of each network
  over all ``B*T`` next observations from the states after the rows (double Q's choice and value),
  the in-sequence n-step targets under value rescaling, the masked Huber loss, per-sequence
  priorities, a fused Adam step after clipping the gradient norm, and the outputs a learner needs
  (loss and mean Q as floats, priorities as numpy). Differences, each small beside an update of
  30-60 ms: the hand loop writes ``h^-1`` as the paper does (rlpipe rewrites it without the
  cancellation, so the two agree to about 1e-5, not bit for bit); it uses ``nn.ReLU()`` (rlpipe's
  is in place) and torch's ``zero_grad`` (rlpipe's is a plain loop); its target network is a plain
  ``deepcopy`` whose parameters keep ``requires_grad`` (rlpipe's has it off, which makes torch run
  the target pass's GRU input projection as a batched product, ``bmm``, rather than one folded
  ``mm``); and it checks nothing (rlpipe checks the batch's fields and shapes, about 190 more
  Python calls an update, 1,330 against 1,150). Adam is fused on both sides (the hand loop asks
  for it), so the ratio compares the updates, not two Adam kernels.

Each measurement is one function returning its figures; ``main`` joins them into the JSON line.

Usage: ``python benchmarks/sequence.py [--quick]``. The last line printed is JSON.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import json
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch
from torch import nn

from rlpipe.config import load_config
from rlpipe.data.buffer import SequenceBuffer
from rlpipe.policy.optim import initial_learning_rate
from rlpipe.policy.r2d2 import R2D2Policy
from rlpipe.recipes.build import make_policy

ENVS = 16
OBS, CORE = 8, 128
BATCH = 32


def vector_steps(rows: int, seed: int = 0, chunk: int = 1 << 16) -> Iterator[dict[str, np.ndarray]]:
    """``rows`` POPGym-shaped steps of ``ENVS`` envs, in chunks of whole vector steps."""
    rng = np.random.default_rng(seed)
    for start in range(0, rows, chunk):
        n = min(chunk, rows - start)
        ended = rng.random(n) < 1 / 200
        cut = ended & (rng.random(n) < 0.2)
        yield {
            "obs": rng.standard_normal((n, OBS), dtype=np.float32),
            "action": rng.integers(0, 4, n),
            "reward": rng.random(n, dtype=np.float32),
            "next_obs": rng.standard_normal((n, OBS), dtype=np.float32),
            "terminated": ended & ~cut,
            "truncated": cut,
            "env_id": (start + np.arange(n)) % ENVS,
            "core_state": rng.standard_normal((n, CORE), dtype=np.float32),
        }


def best_per_call(fns: dict[str, Callable[[], Any]], calls: int, rounds: int) -> dict[str, float]:
    """Best (over ``rounds`` alternating rounds) mean seconds per call of each of ``fns``."""
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            best[name] = min(best[name], (time.perf_counter() - start) / calls)
    return best


def measure_gather(steps: int, sequence_len: int, calls: int, rounds: int) -> dict[str, Any]:
    """``sample_batch(32)`` of a full SequenceBuffer against numpy's gather of the same bytes."""
    buf = SequenceBuffer(steps, sequence_len, seed=0)
    floor: dict[str, list[np.ndarray]] = {}
    fill_start = time.perf_counter()
    for chunk in vector_steps(steps):
        buf.push_batch(chunk)
        for key, value in chunk.items():
            floor.setdefault(key, []).append(value)
    fill_s = time.perf_counter() - fill_start
    columns = {key: np.concatenate(parts) for key, parts in floor.items()}
    del floor
    core = columns.pop("core_state")
    starts = np.random.default_rng(1).integers(0, steps - sequence_len, (calls, BATCH))
    t = np.arange(sequence_len)
    call = iter(range(1 << 62))

    def numpy_gather() -> dict[str, np.ndarray]:
        first = starts[next(call) % calls]
        rows = first[:, None] + t
        out = {key: col[rows] for key, col in columns.items()}
        out["core_state"] = core[first]
        return out

    def numpy_take() -> dict[str, np.ndarray]:  # the same with ``take``, numpy's faster gather
        first = starts[next(call) % calls]
        rows = first[:, None] + t
        out = {key: col.take(rows, axis=0) for key, col in columns.items()}
        out["core_state"] = core.take(first, axis=0)
        return out

    def rlpipe_sample() -> Any:
        return buf.sample_batch(BATCH, unroll_len=sequence_len)

    for fn in (numpy_gather, numpy_take, rlpipe_sample):  # first calls (caches, allocator) out of the timing
        fn()
    best = best_per_call({"numpy": numpy_gather, "take": numpy_take, "rlpipe": rlpipe_sample}, calls, rounds)
    sequences = buf.count_runs(sequence_len)
    vector = next(vector_steps(ENVS, seed=2))
    push = best_per_call({"push": lambda: buf.push_batch(vector)}, calls, rounds)["push"]
    print(f"filled {steps:,} steps in {fill_s:.1f} s: {sequences:,} sequences of {sequence_len}")
    print(f"numpy gather (floor):   {best['numpy'] * 1e6:8.1f} us per batch of {BATCH}")
    print(f"numpy take:             {best['take'] * 1e6:8.1f} us per batch of {BATCH}")
    print(f"SequenceBuffer sample:  {best['rlpipe'] * 1e6:8.1f} us per batch of {BATCH}")
    print(f"gather_ratio:           {best['numpy'] / best['rlpipe']:8.3f} (goal >= 0.5)")
    print(f"take_ratio:             {best['take'] / best['rlpipe']:8.3f}")
    print(f"push of one vector step ({ENVS} rows): {push * 1e6:.1f} us")
    return {
        "sequences": sequences,
        "numpy_gather_us": round(best["numpy"] * 1e6, 2),
        "rlpipe_sample_us": round(best["rlpipe"] * 1e6, 2),
        "numpy_take_us": round(best["take"] * 1e6, 2),
        "gather_ratio": round(best["numpy"] / best["rlpipe"], 3),
        "take_ratio": round(best["take"] / best["rlpipe"], 3),
        "push16_us": round(push * 1e6, 2),
    }


# ---- R2D2: rlpipe's update vs a hand-written loop ------------------------------------------------
R2D2_PRESET = "popgym-repeatprevious-r2d2"
N_ACTIONS, BURN_IN, NSTEP = 4, 10, 5
POOL = 16  # batches drawn before the clock, taken in turn by both sides
RESCALE_EPS = 1e-3  # value rescaling's eps (Pohlen et al., 2018), as the paper and rlpipe


def r2d2_config(sequence_len: int) -> Any:
    """The R2D2 preset with this benchmark's shapes (every one set here, so that the preset may change)."""
    return load_config(R2D2_PRESET, [
        f"policy.model.obs_shape={OBS}", f"policy.model.action_shape={N_ACTIONS}", "policy.model.core=gru",
        f"policy.model.core_hidden={CORE}", f"policy.learn.batch_size={BATCH}",
        f"policy.collect.unroll_len={sequence_len}", f"policy.learn.burn_in={BURN_IN}", f"policy.nstep={NSTEP}",
        "policy.learn.reward_scale=1",
    ])


def batch_pool(sequence_len: int) -> list[dict[str, np.ndarray]]:
    """``POOL`` batches as the sequence buffer hands them, each with importance weights in (0, 1]."""
    buf = SequenceBuffer(20_000, sequence_len, seed=0)
    for chunk in vector_steps(20_000, seed=3):
        buf.push_batch(chunk)
    rng = np.random.default_rng(4)
    pool = []
    for _ in range(POOL):
        batch = dict(buf.sample_batch(BATCH, unroll_len=sequence_len).data)
        weight = rng.uniform(0.1, 1.0, BATCH).astype(np.float32)
        pool.append(batch | {"weight": weight / weight.max()})
    return pool


class RecurrentDuelingQ(nn.Module):
    """MLP encoder -> GRU -> dueling head: ``obs`` [B, T, obs] from ``h0`` [B, H] -> q [B, T, A], h [B, T, H]."""

    def __init__(self, obs_size: int, hidden: list[int], core_hidden: int, n_actions: int) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for size in hidden:
            layers += [nn.Linear(obs_size, size), nn.ReLU()]
            obs_size = size
        self.encoder = nn.Sequential(*layers)
        self.gru = nn.GRU(obs_size, core_hidden, batch_first=True)
        self.value = nn.Linear(core_hidden, 1)
        self.advantage = nn.Linear(core_hidden, n_actions)

    def forward(self, obs: torch.Tensor, h0: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        states, _ = self.gru(self.encoder(obs), h0.unsqueeze(0))
        v, adv = self.value(states), self.advantage(states)
        return v + adv - adv.mean(dim=-1, keepdim=True), states


def h(x: torch.Tensor) -> torch.Tensor:
    """Value rescaling ``h(x) = sign(x) (sqrt(|x| + 1) - 1) + eps x``."""
    return torch.sign(x) * (torch.sqrt(x.abs() + 1) - 1) + RESCALE_EPS * x


def h_inv(y: torch.Tensor) -> torch.Tensor:
    """``h^-1(y) = sign(y) (((sqrt(1 + 4 eps (|y| + 1 + eps)) - 1) / (2 eps))^2 - 1)``."""
    root = (torch.sqrt(1 + 4 * RESCALE_EPS * (y.abs() + 1 + RESCALE_EPS)) - 1) / (2 * RESCALE_EPS)
    return torch.sign(y) * (root**2 - 1)


def ahead(x: torch.Tensor, k: int, fill: float | bool) -> torch.Tensor:
    """``x`` [B, T] shifted ``k`` rows: row t holds ``x[:, t + k]``, ``fill`` past the sequence's end."""
    return torch.cat([x[:, k:], x.new_full((x.shape[0], k), fill)], dim=1)


def nstep_targets(reward: torch.Tensor, q_next: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor,
                  mask: torch.Tensor, gamma: float, n: int) -> torch.Tensor:
    """``h(sum_k gamma^k r_{t+k} + gamma^m h^-1(q_next_{t+m-1}))`` for every row t (all [B, T]): the
    window stops after n rows or at the episode's last row here (terminated: no bootstrap)."""
    last = terminated | truncated | ~ahead(mask, 1, False)  # no later row of the episode in the sequence
    value = h_inv(q_next)
    g = torch.zeros_like(reward)
    open_ = mask.clone()  # row t's window still reaches row t + k
    for k in range(n):
        g = g + open_ * gamma**k * ahead(reward, k, 0.0)
        ends = ahead(last, k, True)
        bootstrap = open_ & (ends | (k == n - 1)) & ~ahead(terminated, k, True)
        g = g + bootstrap * gamma ** (k + 1) * ahead(value, k, 0.0)
        open_ = open_ & ~ends
    return torch.where(mask, h(g), 0.0)


class HandR2D2:
    """R2D2's update written by hand: burn-in, unroll, double-Q n-step targets, Huber loss, Adam."""

    def __init__(self, cfg: Any) -> None:
        model, learn = cfg.policy.model, cfg.policy.learn
        if not (model.dueling and learn.double_q and learn.value_rescale and model.core == "gru"):
            raise ValueError("the hand loop is dueling double-Q R2D2 with value rescaling and a GRU")
        self.q_network = RecurrentDuelingQ(model.obs_shape, list(model.encoder_hidden_size_list),
                                           model.core_hidden, model.action_shape)
        self.target_network = copy.deepcopy(self.q_network)
        # fused like rlpipe's Adam: the ratio compares the updates, not two Adam kernels
        lr = initial_learning_rate(learn, "learning_rate")  # the preset's schedule starts here, as rlpipe's does
        self.optimizer = torch.optim.Adam(self.q_network.parameters(), lr=lr, fused=True)
        self.gamma, self.nstep = cfg.policy.discount_factor, cfg.policy.nstep
        self.burn_in, self.eta = learn.burn_in, learn.priority_eta
        self.grad_clip, self.target_update_freq = learn.grad_clip, learn.target_update_freq
        self.updates = 0

    def update(self, batch: dict[str, np.ndarray]) -> dict[str, Any]:
        obs, next_obs = torch.as_tensor(batch["obs"]), torch.as_tensor(batch["next_obs"])
        action, reward = torch.as_tensor(batch["action"]), torch.as_tensor(batch["reward"])
        terminated, truncated = torch.as_tensor(batch["terminated"]), torch.as_tensor(batch["truncated"])
        mask, weight = torch.as_tensor(batch["mask"]), torch.as_tensor(batch["weight"])
        h0 = torch.as_tensor(batch["core_state"])
        B, T = action.shape
        burn = self.burn_in

        with torch.no_grad():
            _, h_burn = self.q_network(obs[:, :burn], h0)
        q, h_learn = self.q_network(obs[:, burn:], h_burn[:, -1])
        h_online = torch.cat([h_burn, h_learn.detach()], dim=1)  # state after every row
        with torch.no_grad():
            _, h_target = self.target_network(obs, h0)
            # each row's next_obs, one step from the state after the row (B*T sequences of one step)
            next_rows = next_obs.reshape(B * T, 1, -1)
            q_next_target, _ = self.target_network(next_rows, h_target.reshape(B * T, -1))
            q_next_online, _ = self.q_network(next_rows, h_online.reshape(B * T, -1))
            a_star = q_next_online.argmax(dim=-1, keepdim=True)
            q_next = q_next_target.gather(-1, a_star).view(B, T)
            td_target = nstep_targets(reward, q_next, terminated, truncated, mask, self.gamma, self.nstep)

        q_sa = q.gather(2, action[:, burn:].unsqueeze(2)).squeeze(2)
        target, valid = td_target[:, burn:], mask[:, burn:]
        huber = nn.functional.smooth_l1_loss(q_sa, target, reduction="none")
        loss = (weight.unsqueeze(1) * huber * valid).sum() / valid.sum().clamp(min=1)
        td_abs = (target - q_sa.detach()).abs() * valid
        priority = self.eta * td_abs.amax(dim=1) + (1 - self.eta) * td_abs.sum(dim=1) / valid.sum(dim=1).clamp(min=1)

        self.optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(self.q_network.parameters(), self.grad_clip)
        self.optimizer.step()
        self.updates += 1
        if self.updates % self.target_update_freq == 0:
            self.target_network.load_state_dict(self.q_network.state_dict())
        return {"total_loss": loss.item(), "q_value": q.detach()[valid].mean().item(), "priority": priority.numpy()}


def median_rates(fns: dict[str, Callable[[], Any]], calls: int, rounds: int) -> dict[str, float]:
    """Median (over ``rounds`` rounds, even ones in ``fns``' order, odd ones reversed) calls/s of each of ``fns``."""
    rates: dict[str, list[float]] = {name: [] for name in fns}
    for round_ in range(rounds):
        for name in list(fns) if round_ % 2 == 0 else list(fns)[::-1]:
            start = time.perf_counter()
            for _ in range(calls):
                fns[name]()
            rates[name].append(calls / (time.perf_counter() - start))
    return {name: statistics.median(values) for name, values in rates.items()}


def first_update_gaps(policy: R2D2Policy, hand: HandR2D2, ours: dict[str, np.ndarray],
                      theirs: dict[str, np.ndarray]) -> dict[str, float]:
    """One update of each (same weights, same batch) and how far apart their outputs and clipped gradients
    are, relative to rlpipe's largest value: the two must do the same arithmetic."""
    out_r, out_h = policy.learn_mode.forward(ours), hand.update(theirs)

    def gap(a: Any, b: Any) -> float:
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        return float(np.abs(a - b).max() / np.abs(a).max())

    grads = zip(policy.model.parameters(), hand.q_network.parameters(), strict=True)
    return {**{key: gap(out_r[key], out_h[key]) for key in ("total_loss", "q_value", "priority")},
            "gradient": max(gap(p.grad, q.grad) for p, q in grads)}


def measure_r2d2(sequence_len: int, updates: int, rounds: int) -> dict[str, Any]:
    """Updates/s of rlpipe's R2D2 update and of :class:`HandR2D2` on the same batches, one torch thread."""
    torch.set_num_threads(1)
    torch.manual_seed(0)
    cfg = r2d2_config(sequence_len)
    policy = make_policy(cfg)
    assert isinstance(policy, R2D2Policy)
    hand = HandR2D2(cfg)
    with torch.no_grad():  # the same start: rlpipe's weights, in the same order (encoder, GRU, value, advantage)
        for mine, theirs in zip(hand.q_network.parameters(), policy.model.parameters(), strict=True):
            mine.copy_(theirs)
        hand.target_network.load_state_dict(hand.q_network.state_dict())
    pool = batch_pool(sequence_len)
    rlpipe_batches, hand_batches = itertools.cycle(pool), itertools.cycle(pool)

    gaps = first_update_gaps(policy, hand, next(rlpipe_batches), next(hand_batches))
    if max(gaps.values()) > 1e-3:
        raise RuntimeError(f"the hand loop's first update is not rlpipe's: relative gaps {gaps}")
    rates = median_rates({"rlpipe": lambda: policy.learn_mode.forward(next(rlpipe_batches)),
                          "hand": lambda: hand.update(next(hand_batches))}, updates, rounds)
    ratio = rates["rlpipe"] / rates["hand"]
    print(f"R2D2 updates (batch {BATCH} x {sequence_len} rows, burn-in {BURN_IN}, GRU {CORE}, 1 thread), "
          f"median of {rounds} rounds of {updates}")
    print("first update from the same weights, largest relative gaps: "
          + ", ".join(f"{name} {gap:.1e}" for name, gap in gaps.items()))
    print(f"rlpipe learn_mode.forward: {rates['rlpipe']:8.1f} updates/s")
    print(f"hand-written R2D2 loop:    {rates['hand']:8.1f} updates/s")
    print(f"hand_ratio:                {ratio:8.3f} (goal >= 0.9)")
    return {
        "rlpipe_r2d2_updates_per_s": round(rates["rlpipe"], 2),
        "hand_r2d2_updates_per_s": round(rates["hand"], 2),
        "hand_ratio": round(ratio, 3),
    }

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny run (seconds)")
    parser.add_argument("--steps", type=int, default=1_000_000, help="steps pushed (the buffer's size)")
    parser.add_argument("--sequence-len", type=int, default=50, help="steps per sequence")
    parser.add_argument("--calls", type=int, default=500, help="sample calls per round")
    parser.add_argument("--rounds", type=int, default=7, help="alternating rounds (the best is kept)")
    parser.add_argument("--r2d2-updates", type=int, default=8, help="R2D2 updates per round and side")
    parser.add_argument("--r2d2-rounds", type=int, default=15, help="R2D2 rounds (the median is kept)")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.calls, args.rounds, args.r2d2_updates, args.r2d2_rounds = 20_000, 50, 3, 2, 2
    figures: dict[str, Any] = {"steps": args.steps, "sequence_len": args.sequence_len, "batch": BATCH}
    figures |= measure_gather(args.steps, args.sequence_len, args.calls, args.rounds)
    figures |= measure_r2d2(args.sequence_len, args.r2d2_updates, args.r2d2_rounds)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
