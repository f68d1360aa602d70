"""The offline algorithms' update rules as functions of tensors, and one step of each policy: the
terms they add move the networks the way their papers say (so a test fails if a term is dropped)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from rlpipe.config import load_config
from rlpipe.policy.cql import cql_penalty
from rlpipe.policy.iql import EXP_ADVANTAGE_MAX, awr_weights, expectile_loss
from rlpipe.policy.q_learning import discrete_cql_penalty
from rlpipe.policy.td3_bc import td3_bc_actor_loss
from rlpipe.recipes.build import make_policy

SIZES = ["policy.model.obs_shape=3", "policy.model.action_shape=1", "policy.model.encoder_hidden_size_list=[32,32]"]


def test_the_expectile_loss_weighs_v_below_q_by_tau():
    diff = torch.tensor([2.0, -2.0])  # Q - V: V below Q, then above
    assert expectile_loss(diff, 0.5).item() == pytest.approx(0.5 * 4.0)  # tau 0.5: half the squared error
    assert expectile_loss(diff[:1], 0.9).item() == pytest.approx(0.9 * 4.0)
    assert expectile_loss(diff[1:], 0.9).item() == pytest.approx(0.1 * 4.0)


def test_the_value_that_minimises_the_expectile_loss_is_the_expectile():
    q = torch.tensor([0.0, 1.0, 2.0, 10.0])
    v = torch.zeros((), requires_grad=True)
    optimizer = torch.optim.SGD([v], lr=0.05)
    for _ in range(2000):
        optimizer.zero_grad()
        expectile_loss(q - v, 0.9).backward()
        optimizer.step()
    assert v.item() > q.mean().item() + 1.0  # above the mean, toward the best action's value
    weights = torch.where(q - v.detach() < 0, 0.1, 0.9)
    assert (weights * (q - v.detach())).sum().item() == pytest.approx(0.0, abs=1e-3)  # the expectile's equation


def test_advantage_weights_grow_with_the_advantage_and_are_clipped():
    weights = awr_weights(torch.tensor([-1.0, 0.0, 1.0, 100.0]), temperature=3.0)
    assert weights[0] < weights[1] == 1.0 < weights[2] and weights[3].item() == pytest.approx(EXP_ADVANTAGE_MAX)


def test_td3_bc_scales_q_by_its_mean_magnitude_and_adds_the_squared_action_error():
    q = torch.tensor([10.0, 30.0])
    action = torch.tensor([[0.5], [0.0]])
    data = torch.tensor([[0.0], [0.0]])
    loss, bc = td3_bc_actor_loss(q, action, data, bc_alpha=2.5)
    assert bc.item() == pytest.approx(0.125)  # mean of 0.25 and 0
    assert loss.item() == pytest.approx(-2.5 / 20.0 * 20.0 + 0.125)
    loss_scaled, _ = td3_bc_actor_loss(q * 100, action, data, bc_alpha=2.5)
    assert loss_scaled.item() == pytest.approx(loss.item())  # the Q term does not grow with the reward's scale


def test_cql_penalty_is_the_soft_maximum_over_proposals_less_the_data_value():
    q_proposed = torch.full((2, 3, 4), 1.0)  # 2 critics, 3 states, 4 proposed actions of density 1
    log_density = torch.zeros(3, 4)
    q_data = torch.full((2, 3), 0.5)
    assert cql_penalty(q_proposed, log_density, q_data).item() == pytest.approx(2 * (1.0 + math.log(4) - 0.5))


def test_discrete_cql_pushes_down_the_top_action_and_up_the_datas():
    q = torch.tensor([[1.0, 3.0, 0.0]], requires_grad=True)
    discrete_cql_penalty(q, torch.tensor([0])).backward()
    assert q.grad[0, 1] > 0 and q.grad[0, 0] < 0  # descent lowers Q(a=1), the highest, and raises Q(a=0), the data's


def batch(rng: np.random.Generator, size: int = 32, discrete: bool = False) -> dict[str, np.ndarray]:
    obs_dim = 4 if discrete else 3
    action = rng.integers(0, 2, size) if discrete else rng.uniform(-0.2, 0.2, (size, 1)).astype(np.float32)
    return {"obs": rng.normal(size=(size, obs_dim)).astype(np.float32), "action": action,
            "reward": rng.normal(size=size).astype(np.float32),
            "next_obs": rng.normal(size=(size, obs_dim)).astype(np.float32), "terminated": np.zeros(size, bool)}


def actor_distance_to_data(preset: str, overrides: list[str], updates: int = 200) -> float:
    """Mean |action| of the actor on fresh observations after ``updates`` updates on data whose actions are
    all near 0 and whose rewards are random, from an actor that starts far from 0."""
    torch.manual_seed(0)
    policy = make_policy(load_config(preset, [*SIZES, "policy.model.obs_norm=false", *overrides]))
    rng = np.random.default_rng(0)
    with torch.no_grad():
        policy.actor.head.bias.fill_(0.8)
    for _ in range(updates):
        out = policy.learn_mode.forward(batch(rng))
    assert np.isfinite(out["total_loss"])
    return float(np.abs(policy.eval_mode.forward(rng.normal(size=(256, 3)).astype(np.float32))).mean())


@pytest.mark.parametrize("preset", ["hopper-medium-iql", "hopper-medium-bc"])
def test_the_behaviour_regularised_actors_move_toward_the_datas_actions(preset):
    """IQL's weighted likelihood and BC's squared error pull the actor to the data's actions."""
    assert actor_distance_to_data(preset, []) < 0.3


def test_td3_bc_stays_closer_to_the_data_than_td3():
    """The same updates with the behaviour-cloning term and without it (plain TD3 on the same data)."""
    fast = ["policy.learn.actor_update_freq=1", "policy.learn.learning_rate_actor=0.001"]
    with_bc = actor_distance_to_data("hopper-medium-td3bc", [*fast, "policy.learn.bc_alpha=0.5"], 300)
    without = actor_distance_to_data("hopper-medium-td3bc", [*fast, "policy.type=td3"], 300)
    assert with_bc < 0.5 * without, (with_bc, without)


def test_cql_lowers_q_on_actions_the_data_never_took_more_than_sac_does():
    """After the same updates, CQL's critics rate uniformly random actions lower relative to the data's than
    SAC's critics do: the penalty's whole point."""
    rng_batches = [batch(np.random.default_rng(i)) for i in range(300)]
    gaps = {}
    for policy_type, extra in (("sac", []), ("cql", ["policy.learn.cql_alpha=5"])):
        torch.manual_seed(0)
        preset = "hopper-medium-cql" if policy_type == "cql" else "hopper-medium-sac"
        policy = make_policy(load_config(preset, [*SIZES, *extra]))
        for b in rng_batches:
            policy.learn_mode.forward(b)
        obs = torch.as_tensor(rng_batches[0]["obs"])
        with torch.no_grad():
            q_data = policy.critic(obs, torch.as_tensor(rng_batches[0]["action"])).mean()
            q_far = policy.critic(obs, torch.full((32, 1), 0.95)).mean()
        gaps[policy_type] = (q_data - q_far).item()
    assert gaps["cql"] > gaps["sac"] + 0.1, gaps


def test_discrete_cql_gives_an_action_never_in_the_data_the_lowest_value():
    rng = np.random.default_rng(0)
    values = {}
    for alpha in (0.0, 1.0):
        torch.manual_seed(0)
        policy = make_policy(load_config("cartpole-dqn", ["policy.model.obs_shape=4", "policy.model.action_shape=2",
                                                          "policy.nstep=1", f"policy.learn.cql_alpha={alpha}"]))
        for _ in range(300):
            b = batch(rng, discrete=True)
            b["action"] = np.zeros(32, dtype=np.int64)  # the data only ever takes action 0
            policy.learn_mode.forward(b)
        with torch.no_grad():
            q = policy.model(torch.as_tensor(b["obs"]))
        values[alpha] = (q[:, 0] - q[:, 1]).mean().item()
    assert values[1.0] > values[0.0] + 0.5  # CQL ranks the unseen action well below the data's
