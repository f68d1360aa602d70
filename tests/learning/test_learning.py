"""Learning tests: fixed seeds, small budgets, asserted returns (each runs in well under a minute).

Budgets leave a margin over the slowest run measured across seeds 0-4 and the CPU kernel
sets ``ATEN_CPU_CAPABILITY=avx2`` and ``=default`` (see each test), since float results,
and so whole runs, differ between machines.
"""
from __future__ import annotations

import json

import pytest
import torch

from rlpipe.config import load_config
from rlpipe.entry import train
from rlpipe.utils.metrics import read_metrics
from rlpipe.utils.precision import bf16_fallback_reason

pytestmark = pytest.mark.slow


def run(tmp_path, preset, overrides):
    cfg = load_config(preset, ["run.progress=false", *overrides])
    summary = train(cfg, tmp_path / "run")
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["env_step"] == summary.env_step
    return summary


def test_dqn_balances_cartpole(tmp_path):
    # 195 was first reached at 1,536-5,376 env steps over the seeds and kernel sets
    summary = run(tmp_path, "cartpole-dqn", ["seed=0", "env.stop_value=195", "run.max_env_step=20000"])
    assert summary.solved, summary
    assert summary.best_eval_return >= 195


def test_her_solves_8_bit_flip_where_the_same_dqn_without_it_fails(tmp_path):
    # with HER, 0.9 was first reached at 2,096-2,696 env steps over the seeds and kernel sets; without
    # it the same DQN's best evaluation over 15,000 env steps was 0.02-0.06 on seeds 0-4: HER is what
    # solves it (a broken DQN would fail both halves)
    budget = ["seed=0", "env.env_kwargs.n_bits=8", "run.max_env_step=15000"]
    her = run(tmp_path / "her", "bitflip-her-dqn", [*budget, "run.stop_on_solve=true"])
    assert her.solved and her.best_eval_return >= 0.9, her
    plain = run(tmp_path / "plain", "bitflip-dqn", budget)
    assert plain.env_step == 15000 and plain.best_eval_return <= 0.1, plain


def test_sac_with_her_solves_10_bit_flip_with_continuous_actions(tmp_path):
    # 0.9 was first reached at 6,952-8,696 env steps over seeds 0-4 and both kernel sets
    summary = run(tmp_path, "bitflip-sac-her", ["seed=0", "run.max_env_step=15000"])
    assert summary.solved, summary
    assert summary.best_eval_return >= 0.9


class AutocastWatch:
    """A hook of ``rlpipe.train``: from the first iteration on, records whether the critic's forward
    passes (all in learning steps: SAC acts with its actor) ran under bfloat16 autocast or without."""

    def __init__(self) -> None:
        self.modes: set[str] = set()
        self._watching = False

    def __call__(self, view) -> None:
        if not self._watching:
            view.policy.critic.register_forward_pre_hook(lambda module, args: self.modes.add(self._mode()))
            self._watching = True

    @staticmethod
    def _mode() -> str:
        if not torch.is_autocast_enabled("cpu"):
            return "fp32"
        return "bf16" if torch.get_autocast_dtype("cpu") == torch.bfloat16 else "other autocast"


@pytest.mark.parametrize("precision", ["fp32", "bf16-mixed"])
def test_sac_swings_up_the_pendulum(tmp_path, precision):
    # with [64, 64] networks, -400 was first reached at 1,792-4,864 env steps over seeds 0-4
    # under avx2 and default (seed 0: 2,048 under both); with bfloat16 products at 1,536-3,072
    # under default, avx2 and avx512 (seed 0: 2,048-2,304): 10,000 leave a 2x margin over the worst
    reason = bf16_fallback_reason(torch.device("cpu"))
    if precision == "bf16-mixed" and reason is not None:
        pytest.skip(f"bf16-mixed runs float32 products here, so this case would test fp32 again: {reason}")
    watch = AutocastWatch()
    cfg = load_config("pendulum-sac", ["run.progress=false", "seed=0", "policy.model.encoder_hidden_size_list=[64,64]",
                                       "env.stop_value=-400", "run.max_env_step=10000",
                                       f"policy.learn.precision={precision}"])
    summary = train(cfg, tmp_path / "run", hooks=[watch])
    assert summary.solved, summary
    assert summary.best_eval_return >= -400
    # the critic learned under bfloat16 autocast, and in fp32 never under autocast
    assert watch.modes == ({"bf16"} if precision == "bf16-mixed" else {"fp32"})


def test_crossq_swings_up_the_pendulum(tmp_path):
    # with [64, 64] networks, -400 was first reached at 2,304-5,120 env steps over seeds 0-4
    # under default, avx2 and avx512 (seed 0: 3,072 under all three): 10,000 leave a 2x margin
    summary = run(tmp_path, "pendulum-crossq", ["seed=0", "policy.model.encoder_hidden_size_list=[64,64]",
                                                 "env.stop_value=-400", "run.max_env_step=10000"])
    assert summary.solved, summary
    assert summary.best_eval_return >= -400


def test_rnd_leads_dqn_to_the_deepsea_treasure_where_dqn_alone_does_not_get(tmp_path):
    # DeepSea 12x12, one greedy path out of 2^12, 14,000 env steps: with RND the share of the last 100
    # training episodes reaching the treasure ended at 0.94-0.98 on seeds 0, 2, 3, 4 (seed 1: 0.0), seed 0 at
    # 0.96 under the default, avx2 and avx512 kernel sets (eval return 0.99 from 2,800-4,560 env steps);
    # the same DQN without the bonus ended at 0.0 on seeds 0, 1, 2, 4 (seed 3: 0.98), seed 0 at 0.0 under
    # all three. The bonus is what gets seed 0 there.
    settings = ["seed=0", "env.env_kwargs.size=12", "run.max_env_step=14000", "policy.other.eps.decay=5000",
                "policy.eval.evaluator.eval_freq=25"]
    ended = {}
    for preset in ("deepsea-dqn-rnd", "deepsea-dqn"):
        run(tmp_path / preset, preset, settings)
        ended[preset] = [r for r in read_metrics(tmp_path / preset / "run") if r["kind"] == "train"][-1]
    assert ended["deepsea-dqn-rnd"]["train_success_rate"] >= 0.9, ended
    assert ended["deepsea-dqn"]["train_success_rate"] <= 0.1, ended
    assert ended["deepsea-dqn-rnd"]["env_step"] == ended["deepsea-dqn"]["env_step"] == 14000
