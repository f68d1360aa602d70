"""What rlpipe's CPU numerics choices buy: subnormals computed as zero, the factored noisy layer, and
what DER's noisy 512-unit layer costs.

Each figure compares rlpipe's choice with the alternative in this process, on one torch thread,
with rounds alternating between the two sides and the best round of each kept (slower rounds
measure other load on the machine):

- ``flush_denormal_ratio``: a fused Adam step (rlpipe's ``make_adam``) on the Nature CNN's
  3136x512 layer whose state holds subnormal moments, as a long Atari run's does (Adam's moments
  of inputs that stopped getting gradients decay below 1.2e-38, where x86 arithmetic is many
  times slower; the Atari-100k checkpoint at 25k updates held 9% of its moments there). Time of
  the steps with IEEE subnormals (``torch.set_flush_denormal(False)``, PyTorch's default) over the
  time with them computed as zero (``run.flush_denormal``, rlpipe's default). Each round starts
  from the same state.
- ``noisy_act_ratio`` and ``noisy_update_ratio``: :class:`rlpipe.model.NoisyLinear` of the same
  3136x512 shape, the weight-matrix path (``mu_w + sigma_w * eps_w`` formed, then one product)
  over the factored path rlpipe takes below ``FACTORED_MAX_ROWS`` rows; acting is a forward pass
  of one row, an update a forward and backward pass of 32 rows (DER's batch).
  ``noisy_256_rows_ratio`` is the same update at 256 rows, where the weight matrix is the faster
  path (a ratio below 1 is why the threshold exists).
- ``noisy_encoder_cost_ratio``: a whole ``atari100k-der`` update (C51, batch 32, float32, 18
  actions) with the Nature CNN's 512-unit layer noisy (``policy.model.noisy_encoder: true``, the
  preset's, as Dopamine's DER) over the same update with head-only noise: the price of that setting.

Usage: ``python benchmarks/numerics.py [--quick]``. The last line printed is JSON.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

import numpy as np
import torch

from rlpipe.config import load_config
from rlpipe.model import noisy
from rlpipe.model.noisy import NoisyLinear
from rlpipe.policy.optim import make_adam
from rlpipe.recipes.build import make_policy

IN_FEATURES, OUT_FEATURES = 3136, 512
SUBNORMAL_SHARE = 0.09
"""Share of the layer's Adam moments that are subnormal, those of the weights of its dead inputs (the
Atari-100k checkpoint at 25k updates held 9% of all its moments there)."""


def best_time(sides: dict[str, Callable[[], float]], rounds: int) -> dict[str, float]:
    """Best seconds per call of each side; ``sides`` return the seconds of one timed round. Each side
    runs once untimed first (allocators, kernels and Adam's state warm up)."""
    for side in sides.values():
        side()
    times: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(rounds):
        for name, side in sides.items():
            times[name].append(side())
    return {name: min(values) for name, values in times.items()}


class AdamOnSubnormalMoments:
    """Adam steps on a 3136x512 layer whose dead inputs' moments are subnormal."""

    def __init__(self, steps: int) -> None:
        torch.set_flush_denormal(False)  # else the subnormal state below would be written as zeros
        generator = torch.Generator().manual_seed(0)
        self.weight = torch.nn.Parameter(torch.randn(OUT_FEATURES, IN_FEATURES, generator=generator) * 0.02)
        self.optimizer = make_adam([self.weight], lr=1e-4)
        self.weight.grad = torch.randn(OUT_FEATURES, IN_FEATURES, generator=generator) * 1e-3
        self.optimizer.step()  # creates the state
        dead = int(IN_FEATURES * SUBNORMAL_SHARE)
        state = self.optimizer.state[self.weight]
        tiny = torch.rand(OUT_FEATURES, dead, generator=generator) * 1e-38  # 0 to 1e-38: subnormal
        state["exp_avg"][:, :dead] = tiny
        state["exp_avg_sq"][:, :dead] = tiny
        self.weight.grad[:, :dead] = 0.0  # the dead inputs get no gradient
        subnormal = (state["exp_avg"] != 0) & (state["exp_avg"].abs() < torch.finfo(torch.float32).tiny)
        if int(subnormal.sum()) != OUT_FEATURES * dead:
            raise RuntimeError("the Adam state holds fewer subnormal moments than meant")
        self.start = {key: value.clone() for key, value in state.items()}
        self.start_weight = self.weight.detach().clone()
        self.steps = steps

    def round(self, flush: bool) -> float:
        """Seconds per step of ``steps`` steps from the starting state."""
        for key, value in self.optimizer.state[self.weight].items():
            value.copy_(self.start[key])
        with torch.no_grad():
            self.weight.copy_(self.start_weight)
        torch.set_flush_denormal(flush)
        try:
            start = time.perf_counter()
            for _ in range(self.steps):
                self.optimizer.step()
            return (time.perf_counter() - start) / self.steps
        finally:
            torch.set_flush_denormal(True)  # rlpipe's default, which the other figures run with


def noisy_round(layer: NoisyLinear, x: torch.Tensor, max_rows: int, backward: bool, calls: int) -> float:
    """Seconds per call of the layer's forward (and backward) pass with ``FACTORED_MAX_ROWS = max_rows``."""
    saved = noisy.FACTORED_MAX_ROWS
    noisy.FACTORED_MAX_ROWS = max_rows
    try:
        start = time.perf_counter()
        for _ in range(calls):
            if backward:  # as in an update: fresh gradients of the weights and of the input
                layer.zero_grad(set_to_none=True)
                x.grad = None
                layer(x).sum().backward()
            else:
                with torch.no_grad():
                    layer(x)
        return (time.perf_counter() - start) / calls
    finally:
        noisy.FACTORED_MAX_ROWS = saved


def noisy_ratio(rows: int, backward: bool, calls: int, rounds: int) -> tuple[float, float]:
    """Best ms per call of the weight-matrix path and of the factored path at ``rows`` rows."""
    torch.manual_seed(0)
    layer = NoisyLinear(IN_FEATURES, OUT_FEATURES, sigma0=0.1)
    layer.reset_noise(torch.Generator().manual_seed(1))
    x = torch.rand(rows, IN_FEATURES, requires_grad=backward)  # the layer sits on the convolutions
    factored_rows = rows + 1  # the factored path whatever the layer's threshold
    sides = {
        "matrix": lambda: noisy_round(layer, x, 0, backward, calls),
        "factored": lambda: noisy_round(layer, x, factored_rows, backward, calls),
    }
    best = best_time(sides, rounds)
    return best["matrix"] * 1e3, best["factored"] * 1e3


def der_update_ms(noisy_encoders: tuple[bool, ...], calls: int, rounds: int) -> list[float]:
    """Best ms per ``atari100k-der`` update (float32, random frames) with each ``noisy_encoder`` setting."""
    rng = np.random.default_rng(0)
    rows = 32
    batch = {
        "obs": rng.integers(0, 256, (rows, 4, 84, 84), dtype=np.uint8),
        "next_obs": rng.integers(0, 256, (rows, 4, 84, 84), dtype=np.uint8),
        "action": rng.integers(0, 18, rows),
        "reward": rng.normal(size=rows).astype(np.float32),
        "terminated": np.zeros(rows, dtype=bool),
        "truncated": np.zeros(rows, dtype=bool),
        "weight": np.ones(rows, dtype=np.float32),
        "value_gamma": np.full(rows, 0.99**10, dtype=np.float32),
    }

    def side(noisy_encoder: bool) -> Callable[[], float]:
        shapes = ["policy.model.obs_shape=[4,84,84]", "policy.model.action_shape=18", "policy.model.encoder=nature_cnn"]
        cfg = load_config("atari100k-der", [*shapes, f"policy.model.noisy_encoder={str(noisy_encoder).lower()}"])
        torch.manual_seed(0)
        learn = make_policy(cfg).learn_mode.forward

        def timed() -> float:
            start = time.perf_counter()
            for _ in range(calls):
                learn(batch)
            return (time.perf_counter() - start) / calls

        return timed

    best = best_time({str(setting): side(setting) for setting in noisy_encoders}, rounds)
    return [best[str(setting)] * 1e3 for setting in noisy_encoders]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few rounds (a smoke run)")
    args = parser.parse_args()
    rounds, calls = (2, 3) if args.quick else (7, 20)
    torch.set_num_threads(1)
    torch.set_flush_denormal(True)  # rlpipe's default (run.flush_denormal)

    adam = AdamOnSubnormalMoments(steps=calls)
    best = best_time({"ieee": lambda: adam.round(False), "flush": lambda: adam.round(True)}, rounds)
    adam_ieee_ms, adam_flush_ms = best["ieee"] * 1e3, best["flush"] * 1e3
    act = noisy_ratio(1, backward=False, calls=calls * 5, rounds=rounds)
    update = noisy_ratio(32, backward=True, calls=calls, rounds=rounds)
    wide = noisy_ratio(256, backward=True, calls=max(calls // 4, 2), rounds=rounds)
    der_noisy_ms, der_head_ms = der_update_ms((True, False), calls=max(calls // 2, 2), rounds=rounds)

    print(f"fused Adam step, 9% subnormal moments: IEEE {adam_ieee_ms:.2f} ms, as zero {adam_flush_ms:.2f} ms")
    for name, (matrix, factored) in {"act, 1 row": act, "update, 32 rows": update, "update, 256 rows": wide}.items():
        print(f"noisy 3136x512 {name}: weight matrix {matrix:.2f} ms, factored {factored:.2f} ms")
    print(f"atari100k-der update, float32: noisy 512-unit layer {der_noisy_ms:.1f} ms, head-only {der_head_ms:.1f} ms")
    print(
        json.dumps(
            {
                "adam_ieee_ms": round(adam_ieee_ms, 3),
                "adam_flush_ms": round(adam_flush_ms, 3),
                "flush_denormal_ratio": round(adam_ieee_ms / adam_flush_ms, 3),
                "noisy_act_ratio": round(act[0] / act[1], 3),
                "noisy_update_ratio": round(update[0] / update[1], 3),
                "noisy_256_rows_ratio": round(wide[0] / wide[1], 3),
                "der_update_noisy_encoder_ms": round(der_noisy_ms, 2),
                "der_update_head_only_ms": round(der_head_ms, 2),
                "noisy_encoder_cost_ratio": round(der_noisy_ms / der_head_ms, 3),
            }
        )
    )


if __name__ == "__main__":
    main()
