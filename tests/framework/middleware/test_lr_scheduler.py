"""Learning-rate schedules reach every algorithm's optimizers: the scheduler sets them from the
env step, the update uses them, and the learn output's ``cur_lr*`` reports them."""
from __future__ import annotations

import pytest
import torch

from rlpipe.config import load_config
from rlpipe.config.schedule import parse_schedule
from rlpipe.framework import OnlineRLContext, Task
from rlpipe.framework.middleware import lr_scheduler, scheduled_learning_rates
from rlpipe.recipes.build import build_parts, make_policy
from rlpipe.recipes.pipeline import use_training_pipeline
from tests.policy.batches import continuous_batch
from tests.policy.test_dqn import make_batch

DISCRETE = ["policy.model.obs_shape=4", "policy.model.action_shape=2", "policy.nstep=1"]
CONTINUOUS = ["policy.model.obs_shape=3", "policy.model.action_shape=1", "policy.nstep=1"]
SCHEDULES = {  # each key its own schedule, so that a key driving the wrong group shows
    "learning_rate": "linear(1e-3, 1e-4, 100)",
    "learning_rate_actor": "linear(3e-4, 3e-5, 100)",
    "learning_rate_q": "exp(1e-3, 1e-5, 100)",
    "learning_rate_alpha": "linear(5e-4, 0, 100)",
}
ALGORITHMS = {  # preset, its learning-rate keys, model sizes, a learning batch
    "dqn": ("cartpole-dqn", ["learning_rate"], DISCRETE, lambda: make_batch(0)),
    "c51": ("cartpole-c51", ["learning_rate"], DISCRETE, lambda: make_batch(0)),
    "qrdqn": ("cartpole-qrdqn", ["learning_rate"], DISCRETE, lambda: make_batch(0)),
    "sac": ("pendulum-sac", ["learning_rate_actor", "learning_rate_q", "learning_rate_alpha"], CONTINUOUS,
            lambda: continuous_batch(0, 3, 1)),
    "crossq": ("pendulum-crossq", ["learning_rate_actor", "learning_rate_q", "learning_rate_alpha"], CONTINUOUS,
               lambda: continuous_batch(0, 3, 1)),
    "td3": ("pendulum-td3", ["learning_rate_actor", "learning_rate_q"], CONTINUOUS, lambda: continuous_batch(0, 3, 1)),
    "ddpg": ("pendulum-ddpg", ["learning_rate_actor", "learning_rate_q"], CONTINUOUS,
             lambda: continuous_batch(0, 3, 1)),
}
ENV_STEP = 37


def built(preset, overrides):
    cfg = load_config(preset, overrides)
    torch.manual_seed(0)
    return cfg, make_policy(cfg)


def weights(policy):
    return [p.detach().clone() for name in policy.checkpointed if isinstance(getattr(policy, name), torch.nn.Module)
            for p in getattr(policy, name).parameters()]


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_each_algorithms_optimizers_take_the_scheduled_value(algorithm):
    preset, keys, sizes, batch = ALGORITHMS[algorithm]
    cfg, policy = built(preset, [*sizes, *(f"policy.learn.{key}={SCHEDULES[key]}" for key in keys)])
    assert sorted(scheduled_learning_rates(cfg)) == sorted(keys)
    expected = {key: parse_schedule(SCHEDULES[key]).value(ENV_STEP) for key in keys}
    groups = policy.learning_rate_groups()
    assert all(group["lr"] == parse_schedule(SCHEDULES[key]).start for key in keys for group in groups[key])

    ctx = OnlineRLContext()
    ctx.env_step = ENV_STEP
    lr_scheduler(cfg, policy)(ctx)
    for key in keys:
        assert policy.learning_rate_groups()[key] and all(
            group["lr"] == expected[key] for group in policy.learning_rate_groups()[key])
    out = policy.learn_mode.forward(batch())
    reported = {"learning_rate": "cur_lr", "learning_rate_actor": "cur_lr_actor", "learning_rate_q": "cur_lr_q"}
    assert all(out[reported[key]] == expected[key] for key in keys if key in reported)

    # the update is the one a constant learning rate of that value takes
    _, constant = built(preset, [*sizes, *(f"policy.learn.{key}={expected[key]!r}" for key in keys)])
    constant.learn_mode.forward(batch())
    assert all(torch.equal(a, b) for a, b in zip(weights(policy), weights(constant), strict=True))


def test_an_unknown_learning_rate_key_is_one_line():
    _, policy = built("cartpole-dqn", DISCRETE)
    with pytest.raises(ValueError, match="DQNPolicy has no learning rate 'learn.learning_rate_q' "
                                         r"\(it has learning_rate\)"):
        policy.set_learning_rate("learning_rate_q", 1e-3)


def test_a_learning_rate_schedule_spans_run_max_env_step_without_a_decay():
    cfg, policy = built("cartpole-dqn", [*DISCRETE, "policy.learn.learning_rate=linear(1e-3, 0)",
                                         "run.max_env_step=1000"])
    ctx = OnlineRLContext()
    ctx.env_step = 250
    lr_scheduler(cfg, policy)(ctx)
    assert policy.optimizer.param_groups[0]["lr"] == pytest.approx(7.5e-4)
    ctx.env_step = 4000
    lr_scheduler(cfg, policy)(ctx)
    assert policy.optimizer.param_groups[0]["lr"] == 0.0


def test_the_scheduled_learning_rate_survives_the_policys_state_dict():
    cfg, policy = built("pendulum-sac", [*CONTINUOUS, "policy.learn.learning_rate_q=linear(1e-3, 1e-4, 100)"])
    ctx = OnlineRLContext()
    ctx.env_step = 50
    lr_scheduler(cfg, policy)(ctx)
    state = policy.state_dict()
    _, fresh = built("pendulum-sac", [*CONTINUOUS, "policy.learn.learning_rate_q=linear(1e-3, 1e-4, 100)"])
    fresh.load_state_dict(state)
    assert fresh.critic_optimizer.param_groups[0]["lr"] == pytest.approx(5.5e-4)
    fresh.set_learning_rate("learning_rate_q", 2e-4)  # the loaded optimizer's groups, not the replaced ones
    assert fresh.critic_optimizer.param_groups[0]["lr"] == 2e-4


def test_the_pipeline_has_a_scheduler_only_when_a_learning_rate_is_scheduled():
    def names(overrides):
        with build_parts(load_config("cartpole-dqn", ["env.collector_env_num=1", "env.evaluator_env_num=1",
                                                      *overrides])) as parts:
            return [getattr(fn, "__qualname__", type(fn).__qualname__)
                    for fn in use_training_pipeline(Task(), parts).middleware]

    plain = names([])
    scheduled = names(["policy.learn.learning_rate=linear(1e-3, 1e-4)"])
    assert "lr_scheduler" not in plain
    assert scheduled.index("lr_scheduler") == scheduled.index("OffPolicyLearner") - 1
    assert [name for name in scheduled if name != "lr_scheduler"] == plain
