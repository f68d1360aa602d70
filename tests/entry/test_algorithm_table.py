"""The entry layer reads the table of algorithms: policy class, action size, exploration, buffer estimate."""
from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

from rlpipe.config import ConfigError, load_config
from rlpipe.config.algorithms import ALGORITHMS, ActionKind, Exploration
from rlpipe.data import DequeBuffer
from rlpipe.framework import OnlineRLContext, Task
from rlpipe.framework.middleware import OffPolicyLearner
from rlpipe.framework.middleware.functional import TrainingDivergedError
from rlpipe.policy import C51Policy, CrossQPolicy, DDPGPolicy, DQNPolicy, QRDQNPolicy, SACPolicy, TD3Policy
from rlpipe.policy.bc import BCPolicy
from rlpipe.policy.cql import CQLPolicy
from rlpipe.policy.iql import IQLPolicy
from rlpipe.policy.r2d2 import R2D2Policy
from rlpipe.policy.td3_bc import TD3BCPolicy
from rlpipe.recipes import build
from rlpipe.recipes.build import build_parts, check_buffer_fits, make_policy, policy_class
from rlpipe.recipes.pipeline import use_collect_half

SMALL = ["env.collector_env_num=2", "env.evaluator_env_num=1", "policy.collect.n_sample=2",
         "policy.learn.batch_size=4", "policy.random_collect_size=0"]


def test_each_row_names_its_policy_class():
    expected = {"dqn": DQNPolicy, "c51": C51Policy, "qrdqn": QRDQNPolicy, "sac": SACPolicy, "td3": TD3Policy,
                "ddpg": DDPGPolicy, "crossq": CrossQPolicy, "td3_bc": TD3BCPolicy, "iql": IQLPolicy, "cql": CQLPolicy,
                "bc": BCPolicy, "r2d2": R2D2Policy}
    assert {name: policy_class(name) for name in ALGORITHMS} == expected


def test_make_policy_builds_the_class_of_the_row():
    cfg = load_config("pendulum-td3", ["policy.model.obs_shape=3", "policy.model.action_shape=1"])
    assert type(make_policy(cfg)) is TD3Policy


def collect_kwargs_seen(cfg) -> dict:
    """The ``ctx.collect_kwargs`` the collector of ``cfg``'s collect half acts with, on one iteration."""
    seen = {}
    with build_parts(cfg) as parts:
        task = Task()
        with task.start(ctx=OnlineRLContext()):
            use_collect_half(task, parts.cfg, parts.policy, parts.collector_env)
            task.use(lambda ctx: seen.update(ctx.collect_kwargs))
            task.run(max_step=1)
    return seen


def test_the_collect_half_explores_epsilon_greedily_as_the_row_says(monkeypatch):
    assert collect_kwargs_seen(load_config("cartpole-dqn", SMALL)) == {"eps": 1.0}
    assert collect_kwargs_seen(load_config("pendulum-sac", SMALL)) == {}
    # the pipeline reads the row, not the name: a sac row marked epsilon-greedy gets the schedule
    monkeypatch.setitem(ALGORITHMS, "sac", dataclasses.replace(ALGORITHMS["sac"], exploration=Exploration.EPSILON))
    assert collect_kwargs_seen(load_config("pendulum-sac", SMALL)) == {"eps": 1.0}


def test_the_action_size_follows_the_rows_action_kind():
    with build_parts(load_config("pendulum-ddpg", SMALL)) as parts:
        assert ALGORITHMS["ddpg"].action_kind is ActionKind.CONTINUOUS and parts.cfg.policy.model.action_shape == 1
    with build_parts(load_config("cartpole-dqn", SMALL)) as parts:
        assert parts.cfg.policy.model.action_shape == 2
    with pytest.raises(ConfigError, match=r"policy\.type 'crossq' needs a continuous \(flat Box\) action space"):
        build_parts(load_config("hopper-crossq", [*SMALL, "env.env_id=CartPole-v1"]))


@pytest.mark.parametrize(("preset", "sizes", "row_bytes"), [
    ("cartpole-dqn", ["policy.model.obs_shape=4", "policy.model.action_shape=2"], 8 * 4 + 8 + 32),
    ("pendulum-sac", ["policy.model.obs_shape=3", "policy.model.action_shape=1"], 8 * 3 + 4 + 32),
    ("hopper-crossq", ["policy.model.obs_shape=11", "policy.model.action_shape=3"], 8 * 11 + 4 * 3 + 32),
])
def test_the_buffer_estimate_counts_actions_by_the_rows_action_kind(monkeypatch, preset, sizes, row_bytes):
    monkeypatch.setattr(build, "available_memory", lambda: 1)
    cfg = load_config(preset, sizes)
    with pytest.raises(ConfigError, match=rf"transitions of about {row_bytes} bytes need"):
        check_buffer_fits(cfg)


class NanLoss:
    def forward(self, batch):
        return {"total_loss": float("nan")}


def filled_buffer(n: int = 8) -> DequeBuffer:
    buffer = DequeBuffer(size=n)
    buffer.push_batch({"obs": np.zeros((n, 1), np.float32), "action": np.zeros(n, np.int64),
                       "reward": np.zeros(n, np.float32), "next_obs": np.zeros((n, 1), np.float32),
                       "terminated": np.zeros(n, bool), "truncated": np.zeros(n, bool)})
    return buffer


@pytest.mark.parametrize(("policy_type", "advice"), [
    ("sac", "try a lower policy.learn.learning_rate_actor / policy.learn.learning_rate_q / "
            "policy.learn.learning_rate_alpha or set policy.learn.grad_clip"),
    ("td3", "try a lower policy.learn.learning_rate_actor / policy.learn.learning_rate_q or set "
            "policy.learn.grad_clip"),
    ("dqn", "try a lower policy.learn.learning_rate or set policy.learn.grad_clip"),
])
def test_the_divergence_error_names_the_learning_rates_the_algorithm_reads(policy_type, advice):
    cfg = load_config("cartpole-dqn" if policy_type == "dqn" else f"pendulum-{policy_type}", SMALL)
    ctx = OnlineRLContext()
    with pytest.raises(TrainingDivergedError) as err:
        OffPolicyLearner(cfg, NanLoss(), filled_buffer())(ctx)
    assert str(err.value) == f"total_loss is nan at train_iter 0: training diverged ({advice})"


def test_a_seed_style_config_still_drives_the_learner():
    """A SimpleNamespace with only the seed's fields never meets the table (nor pydantic)."""
    learn = SimpleNamespace(update_per_collect=2, batch_size=4)
    seed_cfg = SimpleNamespace(seed=0, policy=SimpleNamespace(priority=False, learn=learn,
                                                              collect=SimpleNamespace(unroll_len=1)))
    ctx = OnlineRLContext()
    with pytest.raises(TrainingDivergedError, match=r"\(try a lower policy\.learn\.learning_rate or set"):
        OffPolicyLearner(seed_cfg, NanLoss(), filled_buffer())(ctx)
