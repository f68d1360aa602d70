"""SAC and TD3 update throughput: rlpipe's OffPolicyLearner vs a hand-written loop and SB3.

What is timed is gradient updates per second on HalfCheetah-v5-shaped data (obs 17,
action 6 in ``[-1, 1]``): batch 256, an actor and two critics that are each a 256x256 MLP,
discount 0.99, Polyak ``tau = 0.005``, Adam at 3e-4, a learned temperature starting at 0.2,
no gradient clipping, one torch thread. All runners sample uniformly from the same 100,000
random transitions already in their replay buffer. On a 2-core CPU the network update is
the whole cost of training SAC on MuJoCo (an env step costs tens of microseconds, an
update tens of milliseconds), so updates per second decide wall-clock training time.

Runners:

* ``rlpipe``: the framework path. ``DequeBuffer`` (filled with ``push_batch``) ->
  ``OffPolicyLearner`` (fetcher and trainer middleware) -> ``SACPolicy.learn_mode.forward``,
  which also returns its metrics and per-sample ``|td_error|`` as floats and numpy.
* ``hand``: a minimal SAC update written the way one writes it first (after CleanRL):
  numpy ring arrays sampled with ``Generator.integers``, two separate critic
  ``nn.Sequential``s called one after the other, a tanh-Gaussian actor through
  ``torch.distributions.Normal``, learned temperature, ``torch.optim.Adam`` with its
  defaults (no fused kernel), and a Python loop over parameters for the target update. As in
  CleanRL and SB3, the actor loss also backpropagates into the critics' weights (gradients
  the next ``zero_grad`` discards; rlpipe freezes the critics there). It computes no
  metrics. ``hand_ratio = rlpipe / hand`` (goal >= 1.0): the framework must not cost more
  than it saves.
* ``sb3``: ``stable_baselines3.SAC("MlpPolicy", ...)`` on a dummy env with the same Box
  spaces (no simulator: only the update is timed), its ``ReplayBuffer`` arrays set
  directly, timed through ``model.train(gradient_steps, batch_size)``.
  ``sb3_ratio = rlpipe / sb3`` (goal >= 1.5).
* ``matmul_floor``: only the matrix products of one SAC update (:class:`MatmulFloorRunner`), the
  BLAS time any implementation of these shapes spends. ``floor_ratio = rlpipe / floor`` is the
  share of that floor rlpipe reaches; ``floor_sb3_ratio = floor / sb3`` is the most any SAC
  with these products could gain over SB3 on this machine.
* ``rlpipe_sac_bf16``: the ``rlpipe`` runner with ``policy.learn.precision=bf16-mixed`` (the
  products in bfloat16 under ``torch.autocast``; parameters, gradients, Adam and losses float32).
  Not like for like: SB3 has no such setting, so ``sb3_ratio`` stays the fp32 comparison and
  ``bf16_sb3_ratio = rlpipe_sac_bf16 / sb3`` is what a user who opts in gains (on CPUs with
  bfloat16 instructions; elsewhere it is slower). ``bf16_fp32_ratio = rlpipe_sac_bf16 / rlpipe``;
  ``td3_bf16_sb3_ratio`` is the same for TD3.
* The TD3 row: ``TD3Policy`` through the same learner vs ``stable_baselines3.TD3.train``
  (policy delay 2, target noise 0.2 clipped at 0.5). ``td3_sb3_ratio = rlpipe / sb3``. An
  update is one critic step; every second one also steps the actor and the targets.
* ``rlpipe_crossq``: ``CrossQPolicy`` through the same learner, with the same [256, 256]
  networks (no targets; the actor every 3rd update, as in the paper; batch renormalisation;
  the critics see ``s`` and ``s'`` as one batch of 512). ``crossq_sac_ratio =
  rlpipe_crossq / rlpipe`` is what an update costs against SAC's (no SB3 counterpart: SB3
  has no CrossQ; SBX's is in JAX).

Rounds of all runners alternate so that load from other processes hits all alike; the best
round of each is reported (as ``timeit`` advises: slower rounds measure the machine, not
the code). Rounds are short (12 updates, under half a second) so that every runner gets some
in the quiet spells of a shared machine. Without stable-baselines3 (the ``bench`` extra) its
runners are skipped (one line says so) and every figure of theirs is null.

Usage: ``python benchmarks/sac.py [--quick] [--rounds N]``. The last line printed is JSON.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import time
from collections.abc import Callable

import gymnasium as gym
import numpy as np
import torch
from learner import RlpipeRunner  # the sibling benchmark's framework runner (scripts run from benchmarks/)
from peers import peer_installed
from torch import nn

from rlpipe.config import load_config
from rlpipe.recipes.build import policy_class

OBS_SIZE, ACTION_SIZE, BATCH_SIZE, HIDDEN = 17, 6, 256, [256, 256]
N_TRANSITIONS = 100_000
GAMMA, TAU, LR, ALPHA = 0.99, 0.005, 3e-4, 0.2
TD3_POLICY_DELAY, TD3_NOISE_SIGMA, TD3_NOISE_CLIP = 2, 0.2, 0.5
CROSSQ_POLICY_DELAY, CROSSQ_ADAM_BETAS = 3, [0.5, 0.999]


def make_data(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    """``n`` random HalfCheetah-shaped transitions as a columnar batch.

    HalfCheetah never terminates; its episodes are truncated at 1,000 steps.
    """
    rng = np.random.default_rng(seed)
    return {
        "obs": rng.normal(size=(n, OBS_SIZE)).astype(np.float32),
        "next_obs": rng.normal(size=(n, OBS_SIZE)).astype(np.float32),
        "action": rng.uniform(-1.0, 1.0, size=(n, ACTION_SIZE)).astype(np.float32),
        "reward": rng.normal(size=n).astype(np.float32),
        "terminated": np.zeros(n, dtype=bool),
        "truncated": np.arange(n) % 1000 == 999,
    }


# ---- rlpipe ------------------------------------------------------------------------
def rlpipe_config(policy_type: str, update_per_collect: int, precision: str = "fp32"):
    """The benchmark's shapes as an rlpipe config (no preset: its replay_ratio would decide
    update_per_collect)."""
    learn = {
        "precision": precision,
        "batch_size": BATCH_SIZE,
        "update_per_collect": update_per_collect,
        "learning_rate_actor": LR,
        "learning_rate_q": LR,
        "learning_rate_alpha": LR,
        "alpha": ALPHA,
        "auto_alpha": True,
        "grad_clip": None,
    }
    if policy_type == "crossq":
        learn |= {"actor_update_freq": CROSSQ_POLICY_DELAY, "adam_betas": CROSSQ_ADAM_BETAS}
    else:
        learn["target_theta"] = TAU
    if policy_type == "td3":
        learn |= {
            "actor_update_freq": TD3_POLICY_DELAY,
            "noise_sigma": TD3_NOISE_SIGMA,
            "noise_clip": TD3_NOISE_CLIP,
        }
    return load_config(
        {
            "policy": {
                "type": policy_type,
                "discount_factor": GAMMA,
                "model": {
                    "obs_shape": OBS_SIZE,
                    "action_shape": ACTION_SIZE,
                    "encoder_hidden_size_list": HIDDEN,
                },
                "learn": learn,
                "other": {"replay_buffer": {"replay_buffer_size": N_TRANSITIONS}},
            }
        }
    )


def rlpipe_runner(
    policy_type: str, data: dict[str, np.ndarray], update_per_collect: int, precision: str = "fp32"
) -> RlpipeRunner:
    """The framework path (``benchmarks/learner.py``'s runner) with the policy of ``policy_type``."""
    return RlpipeRunner(rlpipe_config(policy_type, update_per_collect, precision), data, policy_class(policy_type))


# ---- hand-written SAC ----------------------------------------------------------------
def mlp(in_size: int, out_size: int) -> nn.Sequential:
    layers: list[nn.Module] = []
    for size in HIDDEN:
        layers += [nn.Linear(in_size, size), nn.ReLU()]
        in_size = size
    return nn.Sequential(*layers, nn.Linear(in_size, out_size))


class Actor(nn.Module):
    """Tanh-Gaussian policy: one MLP outputs the mean and log std of each action dimension."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(OBS_SIZE, 2 * ACTION_SIZE)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, log_std = self.net(obs).chunk(2, dim=-1)
        log_std = log_std.clamp(-20.0, 2.0)
        normal = torch.distributions.Normal(mean, log_std.exp())
        u = normal.rsample()
        action = torch.tanh(u)
        log_pi = normal.log_prob(u) - torch.log(1.0 - action.pow(2) + 1e-6)
        return action, log_pi.sum(dim=-1)


class HandSACRunner:
    """SAC written inline: numpy sampling, two critic modules, default Adam, looped Polyak step."""

    def __init__(self, data: dict[str, np.ndarray]) -> None:
        torch.manual_seed(0)
        self.actor = Actor()
        self.q1, self.q2 = mlp(OBS_SIZE + ACTION_SIZE, 1), mlp(OBS_SIZE + ACTION_SIZE, 1)
        self.q1_target, self.q2_target = copy.deepcopy(self.q1), copy.deepcopy(self.q2)
        self.q_params = list(self.q1.parameters()) + list(self.q2.parameters())
        self.target_params = list(self.q1_target.parameters()) + list(self.q2_target.parameters())
        self.q_optimizer = torch.optim.Adam(self.q_params, lr=LR)
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=LR)
        self.log_alpha = torch.full((1,), math.log(ALPHA), requires_grad=True)
        self.alpha_optimizer = torch.optim.Adam([self.log_alpha], lr=LR)
        self.target_entropy = -float(ACTION_SIZE)
        self.columns = {k: v.copy() for k, v in data.items()}
        self.size = len(data["obs"])
        self.rng = np.random.default_rng(0)

    def run(self, n_updates: int) -> int:
        c = self.columns
        for _ in range(n_updates):
            idx = self.rng.integers(self.size, size=BATCH_SIZE)
            obs = torch.as_tensor(c["obs"][idx])
            action = torch.as_tensor(c["action"][idx])
            reward = torch.as_tensor(c["reward"][idx])
            next_obs = torch.as_tensor(c["next_obs"][idx])
            terminated = torch.as_tensor(c["terminated"][idx]).float()
            alpha = self.log_alpha.exp().item()

            with torch.no_grad():
                next_action, next_log_pi = self.actor(next_obs)
                next_sa = torch.cat([next_obs, next_action], dim=1)
                q_next = torch.min(self.q1_target(next_sa), self.q2_target(next_sa)).squeeze(1)
                td_target = reward + GAMMA * (1.0 - terminated) * (q_next - alpha * next_log_pi)
            sa = torch.cat([obs, action], dim=1)
            q1 = self.q1(sa).squeeze(1)
            q2 = self.q2(sa).squeeze(1)
            q_loss = 0.5 * (nn.functional.mse_loss(q1, td_target) + nn.functional.mse_loss(q2, td_target))
            self.q_optimizer.zero_grad()
            q_loss.backward()
            self.q_optimizer.step()

            action_pi, log_pi = self.actor(obs)
            sa_pi = torch.cat([obs, action_pi], dim=1)
            q_pi = torch.min(self.q1(sa_pi), self.q2(sa_pi)).squeeze(1)
            actor_loss = (alpha * log_pi - q_pi).mean()
            self.actor_optimizer.zero_grad()
            actor_loss.backward()
            self.actor_optimizer.step()

            alpha_loss = -(self.log_alpha * (log_pi.detach() + self.target_entropy)).mean()
            self.alpha_optimizer.zero_grad()
            alpha_loss.backward()
            self.alpha_optimizer.step()

            with torch.no_grad():
                for param, target_param in zip(self.q_params, self.target_params, strict=True):
                    target_param.mul_(1.0 - TAU).add_(TAU * param)
        return n_updates


# ---- the matrix products alone ------------------------------------------------------------
class MatmulFloorRunner:
    """Only the matrix products of one SAC update, in one sequence, into preallocated outputs.

    No autograd, activations, losses, optimizer or sampling: the BLAS time every SAC of these
    shapes must spend (twin critics as one ``bmm`` per layer, as rlpipe's ``EnsembleQ``). The
    products, with ``x`` the critics' input ``[B, obs + action]`` and ``h`` a hidden activation:

    * target: actor on ``s'`` (3 layers, both heads), target critics on ``(s', a')``;
    * critic step: critics forward on ``(s, a)``, weight gradients of all layers and the
      input gradient of the hidden layer;
    * actor step: actor on ``s``, critics forward on ``(s, a_pi)`` and their input gradients
      down to the action (no weight gradients: rlpipe freezes them), the actor's weight
      gradients and its hidden input gradients.

    The critics' one-output layer is left out (rlpipe computes it as multiply-and-sum).
    ``floor_ratio = rlpipe / floor`` is the share of the hardware's best that rlpipe reaches.
    """

    def __init__(self) -> None:
        torch.manual_seed(0)
        n, b, h, x_size = 2, BATCH_SIZE, HIDDEN[0], OBS_SIZE + ACTION_SIZE
        self.x = torch.randn(n, b, x_size)
        self.h_b = torch.randn(n, b, h)  # [members, rows, hidden] activations and gradients
        self.w1, self.w2 = torch.randn(n, x_size, h), torch.randn(n, h, h)
        self.out_h, self.out_x = torch.empty(n, b, h), torch.empty(n, b, x_size)
        self.grad_w1, self.grad_w2 = torch.empty(n, x_size, h), torch.empty(n, h, h)
        self.obs, self.a_h = torch.randn(b, OBS_SIZE), torch.randn(b, h)
        self.actor_w1, self.actor_w2 = torch.randn(OBS_SIZE, h), torch.randn(h, h)
        self.head_w, self.head_g = torch.randn(h, ACTION_SIZE), torch.randn(b, ACTION_SIZE)
        self.a_out_h, self.a_out_head = torch.empty(b, h), torch.empty(b, ACTION_SIZE)
        self.a_grad_w1, self.a_grad_w2 = torch.empty(OBS_SIZE, h), torch.empty(h, h)
        self.a_grad_head = torch.empty(h, ACTION_SIZE)

    def _actor_forward(self) -> None:
        torch.mm(self.obs, self.actor_w1, out=self.a_out_h)
        torch.mm(self.a_h, self.actor_w2, out=self.a_out_h)
        for _ in range(2):  # mean and log-std heads
            torch.mm(self.a_h, self.head_w, out=self.a_out_head)

    def _critic_forward(self) -> None:
        torch.bmm(self.x, self.w1, out=self.out_h)
        torch.bmm(self.h_b, self.w2, out=self.out_h)

    def run(self, n_updates: int) -> int:
        for _ in range(n_updates):
            self._actor_forward()  # a' ~ pi(s')
            self._critic_forward()  # target critics
            self._critic_forward()  # critic step: forward, then its gradients
            torch.bmm(self.h_b.transpose(1, 2), self.h_b, out=self.grad_w2)
            torch.bmm(self.h_b, self.w2.transpose(1, 2), out=self.out_h)
            torch.bmm(self.x.transpose(1, 2), self.h_b, out=self.grad_w1)
            self._actor_forward()  # actor step: a ~ pi(s), critics, input gradients, actor gradients
            self._critic_forward()
            torch.bmm(self.h_b, self.w2.transpose(1, 2), out=self.out_h)
            torch.bmm(self.h_b, self.w1.transpose(1, 2), out=self.out_x)
            for _ in range(2):
                torch.mm(self.a_h.t(), self.head_g, out=self.a_grad_head)
                torch.mm(self.head_g, self.head_w.t(), out=self.a_out_h)
            torch.mm(self.a_h.t(), self.a_h, out=self.a_grad_w2)
            torch.mm(self.a_h, self.actor_w2.t(), out=self.a_out_h)
            torch.mm(self.obs.t(), self.a_h, out=self.a_grad_w1)
        return n_updates


# ---- stable-baselines3 ---------------------------------------------------------------
class BoxEnv(gym.Env):
    """HalfCheetah's spaces without the simulator: SB3 only needs them to build its model."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (OBS_SIZE,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (ACTION_SIZE,), np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        return np.zeros(OBS_SIZE, dtype=np.float32), {}

    def step(self, action: np.ndarray):
        return np.zeros(OBS_SIZE, dtype=np.float32), 0.0, False, False, {}


class SB3Runner:
    """``SAC`` or ``TD3`` from stable-baselines3; ``train`` is timed on a pre-filled buffer."""

    def __init__(self, algo: str, data: dict[str, np.ndarray]) -> None:
        from stable_baselines3 import SAC, TD3
        from stable_baselines3.common.logger import Logger

        torch.manual_seed(0)
        common = {
            "policy_kwargs": {"net_arch": HIDDEN},
            "learning_rate": LR,
            "buffer_size": N_TRANSITIONS,
            "learning_starts": 0,
            "batch_size": BATCH_SIZE,
            "tau": TAU,
            "gamma": GAMMA,
            "device": "cpu",
            "seed": 0,
        }
        if algo == "sac":
            self.model = SAC("MlpPolicy", BoxEnv(), ent_coef=f"auto_{ALPHA}", **common)
        else:
            self.model = TD3(
                "MlpPolicy",
                BoxEnv(),
                policy_delay=TD3_POLICY_DELAY,
                target_policy_noise=TD3_NOISE_SIGMA,
                target_noise_clip=TD3_NOISE_CLIP,
                **common,
            )
        self.model.set_logger(Logger(folder=None, output_formats=[]))  # learn() would set one
        rb = self.model.replay_buffer
        n = len(data["obs"])
        # SB3 stores [buffer_size, n_envs, ...]; a done that is also a timeout bootstraps.
        rb.observations[:n, 0] = data["obs"]
        rb.next_observations[:n, 0] = data["next_obs"]
        rb.actions[:n, 0] = data["action"]
        rb.rewards[:n, 0] = data["reward"]
        rb.dones[:n, 0] = data["terminated"] | data["truncated"]
        rb.timeouts[:n, 0] = data["truncated"]
        rb.pos, rb.full = n % rb.buffer_size, n == rb.buffer_size

    def run(self, n_updates: int) -> int:
        self.model.train(gradient_steps=n_updates, batch_size=BATCH_SIZE)
        return n_updates


# ---- measurement -----------------------------------------------------------------------
def timed(run: Callable[[int], int], n_updates: int) -> float:
    """Updates per second of one round."""
    start = time.perf_counter()
    done = run(n_updates)
    return done / (time.perf_counter() - start)


def ratio(a: float | None, b: float | None) -> float | None:
    """``a / b``, or None where a side was not measured (SB3's, when it is not installed)."""
    return None if a is None or b is None else a / b


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny run (a smoke test, figures meaningless)")
    parser.add_argument("--rounds", type=int, default=None, help="timed rounds per runner (default 25; 2 with --quick)")
    args = parser.parse_args()
    rounds, per_round = (2, 10) if args.quick else (25, 12)
    rounds = args.rounds or rounds
    # One intra-op thread everywhere: batch-256 matmuls on a 2-core box gain little from a
    # second thread that other processes also want, and thread barriers add noise.
    torch.set_num_threads(1)
    have_sb3 = peer_installed("stable_baselines3")

    data = make_data(N_TRANSITIONS)
    runners = {
        "rlpipe_sac": rlpipe_runner("sac", data, per_round),
        "rlpipe_sac_bf16": rlpipe_runner("sac", data, per_round, precision="bf16-mixed"),
        "hand_sac": HandSACRunner(data),
        "sb3_sac": SB3Runner("sac", data) if have_sb3 else None,
        "matmul_floor": MatmulFloorRunner(),
        "rlpipe_td3": rlpipe_runner("td3", data, per_round),
        "rlpipe_td3_bf16": rlpipe_runner("td3", data, per_round, precision="bf16-mixed"),
        "sb3_td3": SB3Runner("td3", data) if have_sb3 else None,
        "rlpipe_crossq": rlpipe_runner("crossq", data, per_round),
    }
    torch.set_num_threads(1)  # in case a library changed it while building
    measured = {name: runner for name, runner in runners.items() if runner is not None}
    for runner in measured.values():  # warm-up: allocator, Adam state, first-call overheads
        runner.run(per_round)
    rates: dict[str, list[float]] = {name: [] for name in measured}
    for _ in range(rounds):
        for name, runner in measured.items():
            rates[name].append(timed(runner.run, per_round))

    best = {name: max(rates[name]) if name in rates else None for name in runners}
    ratios = {
        "hand_ratio": ratio(best["rlpipe_sac"], best["hand_sac"]),
        "sb3_ratio": ratio(best["rlpipe_sac"], best["sb3_sac"]),
        "td3_sb3_ratio": ratio(best["rlpipe_td3"], best["sb3_td3"]),
        "floor_ratio": ratio(best["rlpipe_sac"], best["matmul_floor"]),
        "floor_sb3_ratio": ratio(best["matmul_floor"], best["sb3_sac"]),
        "bf16_sb3_ratio": ratio(best["rlpipe_sac_bf16"], best["sb3_sac"]),
        "bf16_fp32_ratio": ratio(best["rlpipe_sac_bf16"], best["rlpipe_sac"]),
        "td3_bf16_sb3_ratio": ratio(best["rlpipe_td3_bf16"], best["sb3_td3"]),
        "crossq_sac_ratio": ratio(best["rlpipe_crossq"], best["rlpipe_sac"]),
    }
    goals = {"hand_ratio": 1.0, "sb3_ratio": 1.5}
    print(f"updates/s (best of {rounds} rounds of {per_round}, batch {BATCH_SIZE}, 1 thread)")
    for name, rate in best.items():
        print(f"  {name:<18} {rate:8.1f}" if rate is not None else f"  {name:<18} skipped")
    for name, value in ratios.items():
        goal = f"  (goal >= {goals[name]})" if name in goals else ""
        print(f"  {name:<18} {value:6.3f}{goal}" if value is not None else f"  {name:<18} skipped")
    print(
        json.dumps(
            {
                **{f"{name}_updates_per_s": None if rate is None else round(rate, 1) for name, rate in best.items()},
                **{name: None if value is None else round(value, 4) for name, value in ratios.items()},
            }
        )
    )


if __name__ == "__main__":
    main()
