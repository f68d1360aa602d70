"""Learning tests: fixed seeds, small budgets, asserted returns (each runs in well under a minute).

Budgets leave a margin over the slowest run measured across seeds 0-4 and the CPU kernel
sets ``ATEN_CPU_CAPABILITY=avx2`` and ``=default`` (see each test), since float results,
and so whole runs, differ between machines.
"""
from __future__ import annotations

import json

import pytest

from rlpipe.config import load_config
from rlpipe.entry import train
from rlpipe.utils.metrics import read_metrics

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


def test_her_solves_8_bit_flip(tmp_path):
    # 0.9 was first reached at 2,096-2,696 env steps over the seeds and kernel sets
    summary = run(tmp_path, "bitflip-her-dqn", ["seed=0", "env.env_kwargs.n_bits=8", "run.stop_on_solve=true",
                                                 "run.max_env_step=15000"])
    assert summary.solved, summary
    assert summary.best_eval_return >= 0.9


def test_plain_dqn_fails_15_bit_flip_on_the_budget_her_solves_8_bits_in(tmp_path):
    summary = run(tmp_path, "bitflip-dqn", ["seed=0", "run.max_env_step=15000"])
    assert summary.best_eval_return <= 0.1


def test_sac_with_her_solves_10_bit_flip_with_continuous_actions(tmp_path):
    # 0.9 was first reached at 6,952-8,696 env steps over seeds 0-4 and both kernel sets
    summary = run(tmp_path, "bitflip-sac-her", ["seed=0", "run.max_env_step=15000"])
    assert summary.solved, summary
    assert summary.best_eval_return >= 0.9


@pytest.mark.parametrize("precision", ["fp32", "bf16-mixed"])
def test_sac_swings_up_the_pendulum(tmp_path, precision):
    # with [64, 64] networks, -400 was first reached at 1,792-4,864 env steps over seeds 0-4
    # under avx2 and default (seed 0: 2,048 under both); with bfloat16 products at 1,536-3,072
    # under default, avx2 and avx512 (seed 0: 2,048-2,304): 10,000 leave a 2x margin over the worst
    summary = run(tmp_path, "pendulum-sac", ["seed=0", "policy.model.encoder_hidden_size_list=[64,64]",
                                              "env.stop_value=-400", "run.max_env_step=10000",
                                              f"policy.learn.precision={precision}"])
    assert summary.solved, summary
    assert summary.best_eval_return >= -400


def test_crossq_swings_up_the_pendulum(tmp_path):
    # with [64, 64] networks, -400 was first reached at 2,304-5,120 env steps over seeds 0-4
    # under default, avx2 and avx512 (seed 0: 3,072 under all three): 10,000 leave a 2x margin
    summary = run(tmp_path, "pendulum-crossq", ["seed=0", "policy.model.encoder_hidden_size_list=[64,64]",
                                                 "env.stop_value=-400", "run.max_env_step=10000"])
    assert summary.solved, summary
    assert summary.best_eval_return >= -400


def test_rnd_leads_dqn_to_the_deepsea_treasure(tmp_path):
    # DeepSea 10x10, one greedy path out of 2^10: over seeds 0-4 and both kernel sets, 90% of
    # the last 100 training episodes first reached the treasure at 6,000-7,200 env steps
    # (eval return 0.99 from 80-4,560) with uniform replay; with the preset's priority replay
    # seed 0 got there at 5,600 (0.99 at the end). The run goes on to 12,000 and must end there.
    run(tmp_path, "deepsea-dqn-rnd", ["seed=0", "env.env_kwargs.size=10", "run.max_env_step=12000",
                                      "policy.other.eps.decay=5000", "policy.eval.evaluator.eval_freq=25"])
    last = [r for r in read_metrics(tmp_path / "run") if r["kind"] == "train"][-1]
    assert last["train_success_rate"] >= 0.9, last
    assert last["intrinsic_reward_mean"] > 0
