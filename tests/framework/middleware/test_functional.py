"""Small function middleware: explorer, termination, trainer, reward estimator, evaluator, logger."""
from __future__ import annotations

import json
import math
import sys
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from rich.console import Console

from rlpipe.config import load_config
from rlpipe.envs import RecreateOnError, VectorEnvManager, env_factory
from rlpipe.envs.episode_stats import EpisodeStats
from rlpipe.errors import EnvironmentFailedError
from rlpipe.framework import OnlineRLContext
from rlpipe.framework.middleware import (
    TrainingDivergedError,
    eps_greedy_handler,
    epsilon_schedule,
    evaluate_episodes,
    interaction_evaluator,
    multistep_trainer,
    online_logger,
    reward_estimator,
    termination_checker,
    trainer,
)
from rlpipe.policy import DQNPolicy
from rlpipe.utils.metrics import MetricsWriter, read_metrics

from .conftest import ConstantActor, FailsOnce, RecordingLearner


def test_epsilon_schedules():
    exp = epsilon_schedule("exp", 1.0, 0.1, 100)
    assert exp(0) == pytest.approx(1.0)
    assert exp(100) == pytest.approx(0.1 + 0.9 * math.exp(-1))
    lin = epsilon_schedule("linear", 1.0, 0.1, 100)
    assert lin(50) == pytest.approx(0.55) and lin(1000) == pytest.approx(0.1)
    with pytest.raises(ValueError, match=r"policy\.other\.eps\.type"):
        epsilon_schedule("cosine", 1, 0, 1)


def test_constant_epsilon_and_a_schedule_over_the_run_budget():
    assert epsilon_schedule("constant", 0.1, 0.05, None)(10**6) == 0.1
    over_run = epsilon_schedule("linear", 1.0, 0.0, None, budget=1000)
    assert over_run(250) == pytest.approx(0.75) and over_run(5000) == 0.0
    with pytest.raises(ValueError, match=r"config key 'policy\.other\.eps': .* needs a decay length"):
        epsilon_schedule("linear", 1.0, 0.0, None)


def test_eps_greedy_handler_spans_run_max_env_step_without_a_decay():
    cfg = load_config("cartpole-dqn", ["policy.other.eps=linear(1.0, 0.1)", "run.max_env_step=1000"])
    ctx = OnlineRLContext()
    ctx.env_step = 500
    eps_greedy_handler(cfg)(ctx)
    assert ctx.collect_kwargs["eps"] == pytest.approx(0.55)


def test_eps_greedy_handler_sets_collect_kwargs():
    cfg = SimpleNamespace(policy=SimpleNamespace(other=SimpleNamespace(
        eps=SimpleNamespace(type="linear", start=1.0, end=0.0, decay=10))))
    ctx = OnlineRLContext()
    ctx.env_step = 5
    eps_greedy_handler(cfg)(ctx)
    assert ctx.collect_kwargs["eps"] == pytest.approx(0.5)


@pytest.mark.parametrize(("env_step", "train_iter", "finish"), [(9, 4, False), (10, 0, True), (0, 5, True)])
def test_termination_checker(env_step, train_iter, finish):
    ctx = OnlineRLContext()
    ctx.env_step, ctx.train_iter = env_step, train_iter
    termination_checker(max_env_step=10, max_train_iter=5)(ctx)
    assert ctx.finish is finish


def test_trainer_counts_iterations_and_skips_missing_data():
    learner = RecordingLearner()
    train = trainer(None, learner)
    ctx = OnlineRLContext()
    train(ctx)
    assert ctx.train_iter == 0 and learner.batches == []
    ctx.train_data = {"reward": np.zeros(4)}
    train(ctx)
    assert ctx.train_iter == 1 and ctx.train_output["total_loss"] == 0.5


def test_trainer_stops_on_nan_loss_with_clear_message():
    ctx = OnlineRLContext()
    ctx.train_data = {"reward": np.zeros(2)}
    with pytest.raises(TrainingDivergedError, match="total_loss is nan at train_iter 0"):
        trainer(None, RecordingLearner(losses=[float("nan")]))(ctx)


def test_multistep_trainer_adds_all_steps():
    class TwoSteps:
        def forward(self, batch):
            return [{"total_loss": 1.0}, {"total_loss": 2.0}]

    ctx = OnlineRLContext()
    ctx.train_data = {}
    multistep_trainer(TwoSteps())(ctx)
    assert ctx.train_iter == 2 and [o["total_loss"] for o in ctx.train_output] == [1.0, 2.0]


@pytest.mark.parametrize("in_place", [True, False])
def test_reward_estimator_uses_in_place_or_returned_batch(in_place):
    class DoubleReward:
        def estimate(self, batch):
            if in_place:
                batch["reward"] *= 2
                return None
            return {**batch, "reward": batch["reward"] * 2}

    ctx = OnlineRLContext()
    ctx.train_data = {"reward": np.ones(3)}
    reward_estimator(None, DoubleReward())(ctx)
    np.testing.assert_array_equal(ctx.train_data["reward"], [2, 2, 2])


def eval_cfg(stop_value=1000.0, eps=None, **evaluator):
    eval_keys = {} if eps is None else {"eps": eps}
    return SimpleNamespace(
        policy=SimpleNamespace(eval=SimpleNamespace(
            evaluator=SimpleNamespace(**(evaluator or {"eval_freq": 10})), **eval_keys)),
        env=SimpleNamespace(n_evaluator_episode=5, stop_value=stop_value),
    )


def test_evaluate_episodes_counts_exactly_n(cartpole_env):
    out = evaluate_episodes(ConstantActor(), cartpole_env, 5)
    assert len(out["episode_return"]) == 5
    # reward is 1 per step in CartPole: return equals length
    np.testing.assert_array_equal(out["episode_return"], out["episode_length"])
    assert np.all(out["episode_length"] < 20)


def test_an_episode_cut_short_by_a_failed_step_is_not_counted(monkeypatch):
    monkeypatch.setattr(FailsOnce, "made", 0)
    env = VectorEnvManager(lambda: RecreateOnError(FailsOnce), num_envs=1, seed=0)
    out = evaluate_episodes(ConstantActor(), env, 2)
    assert out["episode_return"].tolist() == [5.0, 5.0]  # not the 2 steps before the failure


def test_an_environment_that_fails_every_episode_stops_the_evaluation(monkeypatch):
    monkeypatch.setattr(FailsOnce, "broken_every_time", True)
    env = VectorEnvManager(lambda: RecreateOnError(FailsOnce, max_consecutive_errors=100), num_envs=1, seed=0)
    with pytest.raises(EnvironmentFailedError, match="7 episodes ended in a failed environment step and none of 2"):
        evaluate_episodes(ConstantActor(), env, 2)


def test_failures_of_environments_whose_episodes_are_not_needed_are_not_counted():
    """4 envs, 1 episode wanted: a restart failing all 4 at once is 1 failure, not 4 (> 3 x 1)."""

    class RestartsOnce:  # step 1 fails everywhere; then every episode lasts 2 steps
        num_envs, obs, steps = 4, np.zeros((4, 1)), 0
        episode_stats = EpisodeStats(4)

        def reset(self):
            return self.obs

        def step(self, action):
            self.steps += 1
            failed = np.full(4, self.steps == 1)
            ended = failed | np.full(4, self.steps % 2 == 1)
            self.finished_episodes = self.episode_stats.add(np.ones(4), ended)
            return {"reward": np.ones(4), "terminated": np.zeros(4, bool), "truncated": ended, "env_error": failed}

    assert evaluate_episodes(ConstantActor(), RestartsOnce(), 1)["episode_return"].tolist() == [2.0]


def test_successive_evaluations_start_new_episodes(cartpole_env):
    first = evaluate_episodes(ConstantActor(), cartpole_env, 6)["episode_length"]
    second = evaluate_episodes(ConstantActor(), cartpole_env, 6)["episode_length"]
    assert not np.array_equal(first, second)


def test_evaluate_episodes_rejects_zero_episodes(cartpole_env):
    with pytest.raises(ValueError, match="must be >= 1, got 0"):
        evaluate_episodes(ConstantActor(), cartpole_env, 0)


def test_interaction_evaluator_respects_eval_freq_and_stop_value(cartpole_env):
    evaluator = interaction_evaluator(eval_cfg(), ConstantActor(), cartpole_env)
    ctx = OnlineRLContext()
    evaluator(ctx)
    assert ctx.eval_value is not None and ctx.last_eval_iter == 0 and not ctx.finish
    ctx.eval_value = None
    ctx.train_iter = 9
    evaluator(ctx)
    assert ctx.eval_value is None
    ctx.train_iter = 10
    evaluator(ctx)
    assert ctx.last_eval_iter == 10
    solved = OnlineRLContext()
    interaction_evaluator(eval_cfg(stop_value=1.0), ConstantActor(), cartpole_env)(solved)
    assert solved.finish


def test_interaction_evaluator_counts_env_steps_with_eval_every_env_steps(cartpole_env):
    evaluator = interaction_evaluator(eval_cfg(eval_freq=None, eval_every_env_steps=100), ConstantActor(),
                                      cartpole_env)
    ctx = OnlineRLContext()
    evaluated = []
    for env_step in (0, 40, 99, 100, 140, 199, 260, 300, 520):  # a collection may cross several multiples
        ctx.env_step, ctx.train_iter, ctx.eval_value = env_step, env_step * 10, None
        evaluator(ctx)
        if ctx.eval_value is not None:
            evaluated.append(env_step)
    assert evaluated == [0, 100, 260, 300, 520]
    assert (ctx.last_eval_env_step, ctx.last_eval_iter) == (520, 5200)


def test_interaction_evaluator_takes_exactly_one_frequency(cartpole_env):
    with pytest.raises(ValueError, match="exactly one of eval_freq and eval_every_env_steps"):
        interaction_evaluator(eval_cfg(eval_freq=10, eval_every_env_steps=100), ConstantActor(), cartpole_env)


@pytest.mark.parametrize(("eval_keys", "kwargs"), [({}, {}), ({"eps": 0.0}, {}), ({"eps": 0.05}, {"eps": 0.05})])
def test_the_evaluator_passes_policy_eval_eps_only_when_set(cartpole_env, eval_keys, kwargs):
    """``policy.eval.eps`` reaches ``eval_mode.forward``; at 0 or absent (the seed's configs) the
    policy is called with the observations alone, as any eval mode takes them."""
    actor = ConstantActor()
    interaction_evaluator(eval_cfg(**eval_keys), actor, cartpole_env)(OnlineRLContext())
    assert actor.kwargs and all(seen == kwargs for seen in actor.kwargs)


def test_evaluation_with_eps_is_reproducible_and_differs_from_greedy():
    """Two DQN policies of one seed over envs of one seed give the same epsilon-greedy evaluation."""
    def returns(eps):
        torch.manual_seed(0)
        policy = DQNPolicy(load_config({"policy": {"model": {"obs_shape": 4, "action_shape": 2}}}).policy, seed=0)
        env = VectorEnvManager(env_factory("CartPole-v1"), num_envs=2, seed=0)
        try:
            return evaluate_episodes(policy.eval_mode, env, 6, eps=eps)["episode_return"]
        finally:
            env.close()

    noisy = returns(0.5)
    np.testing.assert_array_equal(noisy, returns(0.5))
    assert not np.array_equal(noisy, returns(0.0))


def test_online_logger_writes_means_and_leaves_train_output_alone(tmp_path):
    writer = MetricsWriter(tmp_path, tensorboard=False)
    log = online_logger(writer, train_show_freq=2)
    ctx = OnlineRLContext()
    outputs = [{"total_loss": 1.0, "priority": np.ones(2)}, {"total_loss": 3.0, "priority": np.ones(2)}]
    ctx.train_output = list(outputs)
    ctx.train_iter, ctx.env_step = 2, 50
    ctx.eval_value = 7.0
    ctx.eval_output = {"episode_return": np.array([6.0, 8.0]), "episode_length": np.array([6, 8])}
    log(ctx)
    writer.close()
    assert ctx.train_output == outputs
    records = read_metrics(tmp_path)
    assert records[0] == {"kind": "train", "env_step": 50, "train_iter": 2, "total_loss": 2.0}
    assert records[1]["kind"] == "eval" and records[1]["return_mean"] == 7.0 and records[1]["return_std"] == 1.0
    assert all(json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines())


def test_online_logger_averages_each_figure_over_the_updates_that_report_it(tmp_path):
    writer = MetricsWriter(tmp_path, tensorboard=False)
    log = online_logger(writer, train_show_freq=3)
    ctx = OnlineRLContext()
    # TD3 and CrossQ report the actor's loss only on the updates that step the actor
    ctx.train_output = [{"critic_loss": 1.0, "actor_loss": -4.0}, {"critic_loss": 2.0}, {"critic_loss": 6.0}]
    ctx.train_iter, ctx.env_step = 3, 24
    log(ctx)
    writer.close()
    assert read_metrics(tmp_path)[0] == {"kind": "train", "env_step": 24, "train_iter": 3, "critic_loss": 3.0,
                                         "actor_loss": -4.0}


def test_progress_bar_shows_env_steps_eval_and_loss(capsys):
    from rlpipe.framework.middleware import progress_bar

    ctx = OnlineRLContext()
    ctx.env_step, ctx.train_iter, ctx.last_eval_value = 40, 7, 12.5
    ctx.train_output = [{"total_loss": 0.25, "alpha": 0.125}]
    ctx.collect_episode_stats = {"episode_return_mean": 33.0, "episode_length_mean": 33.0, "success_rate": 0.5}
    ctx.collect_kwargs = {"eps": 0.05}
    with progress_bar(100, enabled=True, console=Console(file=sys.stdout, force_terminal=True, width=200)) as show:
        show(ctx)
    out = capsys.readouterr().out
    assert "40/100" in out
    assert "eval 12.5 | ep return 33 | success 0.50 | eps 0.050 | alpha 0.125 | loss 0.25 | iter 7" in out


def test_without_a_terminal_each_evaluation_is_one_line(capsys):
    from rlpipe.framework.middleware import progress_bar

    ctx = OnlineRLContext()
    ctx.env_step, ctx.train_iter = 40, 7
    with progress_bar(100, enabled=True, console=Console(file=sys.stdout, force_terminal=False)) as show:
        show(ctx)  # no evaluation in this iteration: nothing
        ctx.eval_value = 0.5
        ctx.eval_output = {"episode_return": np.array([-10.0, -20.0]), "episode_success": np.array([True, False])}
        show(ctx)
    assert capsys.readouterr().out == "eval at env step 40/100 | iter 7 | mean return -15 | success rate 0.5\n"


def test_online_logger_adds_throughput_epsilon_and_episode_figures(tmp_path):
    writer = MetricsWriter(tmp_path, tensorboard=False)
    log = online_logger(writer, train_show_freq=1)
    ctx = OnlineRLContext()
    for step in (1, 2):
        ctx.train_output = [{"total_loss": 1.0}]
        ctx.train_iter, ctx.env_step = 10 * step, 100 * step
        ctx.collect_kwargs = {"eps": 0.5 / step}
        ctx.collect_episode_stats = {"episode_return_mean": 3.0, "episode_length_mean": 4.0, "success_rate": 0.25}
        log(ctx)
    writer.close()
    first, second = read_metrics(tmp_path)
    assert "env_steps_per_s" not in first and first["eps"] == 0.5
    assert second["eps"] == 0.25 and second["env_steps_per_s"] > 0
    assert second["env_steps_per_s"] / second["updates_per_s"] == pytest.approx(10.0)  # 100 steps per 10 updates
    assert (second["train_episode_return_mean"], second["train_episode_length_mean"], second["train_success_rate"]) \
        == (3.0, 4.0, 0.25)
