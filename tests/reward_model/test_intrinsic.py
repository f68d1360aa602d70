"""RND and ICM: running statistics, the mixed reward, training, saving, and the learner path."""
from __future__ import annotations

import copy
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from rlpipe.data import DequeBuffer
from rlpipe.framework import OnlineRLContext
from rlpipe.framework.middleware import OffPolicyLearner, reward_model_trainer
from rlpipe.reward_model import IcmRewardModel, RndRewardModel, RunningMeanStd

from ..framework.middleware.conftest import RecordingLearner

OBS, N_ACTIONS = 6, 3


def rm_cfg(**fields):
    values = dict(type="rnd", intrinsic_reward_weight=0.5, learning_rate=1e-2, batch_size=8, update_per_collect=2,
                  obs_norm=True, encoder_hidden_size_list=[32], feature_size=16)
    values.update(fields)
    return SimpleNamespace(**values)


def make_model(kind="rnd", seed=0, **fields):
    torch.manual_seed(seed)
    cfg = rm_cfg(type=kind, **fields)
    return RndRewardModel(cfg, OBS) if kind == "rnd" else IcmRewardModel(cfg, OBS, N_ACTIONS)


def transitions(n=16, seed=0, as_torch=False):
    rng = np.random.default_rng(seed)
    batch = {
        "obs": rng.normal(size=(n, OBS)).astype(np.float32),
        "action": rng.integers(0, N_ACTIONS, size=n),
        "reward": rng.normal(size=n).astype(np.float32),
        "next_obs": rng.normal(size=(n, OBS)).astype(np.float32),
        "terminated": np.zeros(n, dtype=bool),
        "truncated": np.zeros(n, dtype=bool),
    }
    return {k: torch.as_tensor(v) for k, v in batch.items()} if as_torch else batch


# ---- running statistics -----------------------------------------------------------------
def test_running_stats_merge_batches_into_the_statistics_of_all_rows():
    rows = torch.as_tensor(np.random.default_rng(0).normal(3.0, 2.0, size=(1000, 4)))
    stats = RunningMeanStd((4,))
    for chunk in torch.split(rows, [1, 10, 300, 689]):
        stats.update(chunk)
    torch.testing.assert_close(stats.mean, rows.mean(0))
    torch.testing.assert_close(stats.var, rows.var(0, unbiased=False))
    assert stats.count == 1000
    normalised = stats.normalize(rows.float(), clip=1.0)
    assert normalised.abs().max() <= 1.0 and normalised.dtype == torch.float32


# ---- estimate: the mixed reward ------------------------------------------------------------
@pytest.mark.parametrize("kind", ["rnd", "icm"])
@pytest.mark.parametrize("as_torch", [False, True])
def test_estimate_returns_a_new_batch_with_the_weighted_bonus(kind, as_torch):
    model = make_model(kind, intrinsic_reward_weight=0.5)
    model.train(transitions(64, seed=1))  # gives the bonus statistics a std to scale by
    batch = transitions(16, as_torch=as_torch)
    before = copy.deepcopy(batch)
    out = model.estimate(batch)
    assert out is not batch and set(out) == set(batch)
    for key in batch:  # the input (and so the buffer it came from) is untouched
        np.testing.assert_array_equal(np.asarray(batch[key]), np.asarray(before[key]))
    assert isinstance(out["reward"], torch.Tensor) == as_torch
    with torch.no_grad():
        raw = model.bonus(model._transitions(batch))
    expected = np.asarray(before["reward"]) + 0.5 * (raw / model._bonus_stats.std.float()).numpy()
    np.testing.assert_allclose(np.asarray(out["reward"]), expected, rtol=1e-5, atol=1e-6)
    assert model.last_metrics["intrinsic_reward_mean"] > 0


def test_weight_zero_gives_the_extrinsic_reward_back():
    model = make_model(intrinsic_reward_weight=0.0)
    batch = transitions()
    np.testing.assert_array_equal(model.estimate(batch)["reward"], batch["reward"])


def test_bonus_does_not_depend_on_the_rest_of_the_batch():
    model = make_model()
    model.train(transitions(64, seed=1))
    batch = transitions(16)
    alone = model.estimate({k: v[:1] for k, v in batch.items()})["reward"]
    together = model.estimate(batch)["reward"][:1]
    np.testing.assert_allclose(alone, together, rtol=1e-6)


# ---- train -----------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["rnd", "icm"])
def test_training_lowers_the_bonus_of_familiar_transitions_only(kind):
    model = make_model(kind)
    familiar, novel = transitions(64, seed=1), transitions(64, seed=2)
    novel["next_obs"] = novel["next_obs"] * 3.0 + 2.0  # far from anything trained on
    for _ in range(300):
        model.train(familiar)
    with torch.no_grad():
        familiar_bonus = model.bonus(model._transitions(familiar)).mean()
        novel_bonus = model.bonus(model._transitions(novel)).mean()
    assert familiar_bonus < 0.5 * novel_bonus


def test_rnd_target_stays_fixed_and_predictor_learns():
    model = make_model()
    target, predictor = copy.deepcopy(model.target.state_dict()), copy.deepcopy(model.predictor.state_dict())
    model.train(transitions())
    assert all(torch.equal(v, model.target.state_dict()[k]) for k, v in target.items())
    assert not all(torch.equal(v, model.predictor.state_dict()[k]) for k, v in predictor.items())
    assert model.train_iter == 1 and model.last_metrics["reward_model_loss"] > 0


def test_wrong_observation_size_is_one_line_naming_the_size():
    model = make_model()
    batch = transitions()
    batch["obs"] = batch["obs"][:, :3]
    with pytest.raises(ValueError, match=r"RndRewardModel expects observations of size 6, got shape \(16, 3\)"):
        model.estimate(batch)


# ---- state_dict ------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["rnd", "icm"])
def test_state_dict_round_trip_restores_the_same_bonus(kind):
    model = make_model(kind, seed=0)
    for i in range(5):
        model.train(transitions(32, seed=i))
    restored = make_model(kind, seed=1)  # other initial weights
    restored.load_state_dict(copy.deepcopy(model.state_dict()))
    batch = transitions(16, seed=9)
    np.testing.assert_array_equal(model.estimate(batch)["reward"], restored.estimate(batch)["reward"])
    model.train(transitions(32, seed=10))
    restored.train(transitions(32, seed=10))  # the optimizer state came along: the same next step
    np.testing.assert_array_equal(model.estimate(batch)["reward"], restored.estimate(batch)["reward"])
    assert restored.train_iter == model.train_iter == 6


# ---- the learner path (the seed's pattern, done right) --------------------------------------
def pipeline_cfg():
    return SimpleNamespace(
        policy=SimpleNamespace(learn=SimpleNamespace(update_per_collect=3, batch_size=8),
                               collect=SimpleNamespace(unroll_len=1)),
        reward_model=rm_cfg(),
    )


@pytest.mark.parametrize("as_torch", [False, True])
def test_learner_trains_on_the_mixed_reward_and_the_buffer_keeps_its_own(as_torch):
    buffer = DequeBuffer(size=100)
    data = transitions(40, as_torch=as_torch)
    buffer.push_batch(data)
    stored_before = np.asarray(buffer.sample_batch(40, indices=np.arange(40)).data["reward"]).copy()
    model, policy, cfg = make_model(), RecordingLearner(), pipeline_cfg()
    reward_model_trainer(cfg, model, buffer)(OnlineRLContext())
    OffPolicyLearner(cfg, policy, buffer, reward_model=model)(OnlineRLContext())

    assert len(policy.batches) == 3
    stored_rewards = {round(float(r), 5) for r in stored_before}
    trained_rewards = {round(float(r), 5) for b in policy.batches for r in np.asarray(b["reward"])}
    assert not trained_rewards & stored_rewards  # every trained reward carries a bonus
    np.testing.assert_array_equal(
        np.asarray(buffer.sample_batch(40, indices=np.arange(40)).data["reward"]), stored_before)


def test_trainer_updates_the_model_on_schedule_and_reports_its_figures():
    buffer = DequeBuffer(size=100)
    model, cfg, ctx = make_model(), pipeline_cfg(), OnlineRLContext()
    trainer = reward_model_trainer(cfg, model, buffer)
    buffer.push_batch(transitions(4))
    trainer(ctx)  # fewer rows than reward_model.batch_size: nothing to train on yet
    assert model.train_iter == 0 and ctx.reward_model_output is None
    buffer.push_batch(transitions(20, seed=1))
    trainer(ctx)
    assert model.train_iter == 2  # reward_model.update_per_collect
    assert ctx.reward_model_output["reward_model_loss"] > 0
