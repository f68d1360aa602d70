"""``learn.precision=bf16-mixed``: the actor-critic updates with bfloat16 matrix products."""
import numpy as np
import pytest
import torch

from rlpipe.policy import CrossQPolicy, DDPGPolicy, SACPolicy, TD3Policy
from rlpipe.utils import precision

from . import test_crossq, test_sac, test_td3

BF16 = "bf16-mixed"


@pytest.fixture(autouse=True)
def native_bf16(monkeypatch):
    """These tests are of the bfloat16 updates themselves: run them on any CPU (emulated where it
    has no bfloat16 instructions), not the float32 they fall back to there."""
    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset({"avx512_bf16"}))


def build(cls, precision, hidden=(64, 64)):
    """A policy of ``cls`` whose every update steps the actor; the same initial weights for any precision."""
    if cls is SACPolicy:
        cfg = test_sac.sac_cfg(hidden=hidden, precision=precision)
    elif cls is CrossQPolicy:
        cfg = test_crossq.crossq_cfg(hidden=hidden, precision=precision, actor_update_freq=1)
    else:
        cfg = test_td3.make_cfg(hidden=hidden, ddpg=cls is DDPGPolicy, precision=precision)
        if cls is TD3Policy:
            cfg.learn.actor_update_freq = 1
    torch.manual_seed(0)
    return cls(cfg, seed=0)


def cosine(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    flat_a, flat_b = torch.cat([t.flatten() for t in a]), torch.cat([t.flatten() for t in b])
    return float(torch.nn.functional.cosine_similarity(flat_a, flat_b, dim=0))


@pytest.mark.parametrize("cls", [SACPolicy, TD3Policy, DDPGPolicy, CrossQPolicy])
def test_a_bf16_update_follows_the_fp32_one_and_keeps_float32_state(cls):
    fp32, bf16 = build(cls, "fp32"), build(cls, BF16)
    batch = test_sac.continuous_batch(0, test_sac.OBS, test_sac.ACT, size=128)
    out32, out16 = fp32.learn_mode.forward(batch), bf16.learn_mode.forward(batch)

    assert out16["critic_loss"] == pytest.approx(out32["critic_loss"], rel=0.05)
    np.testing.assert_allclose(out16["priority"], out32["priority"], rtol=0.1, atol=0.02)
    # After the step each module keeps the gradients of its own loss (the actor step freezes
    # the critics): bfloat16 products change them by rounding only, not in direction.
    for name in ("actor", "critic"):
        grads32 = [p.grad for p in getattr(fp32, name).parameters()]
        grads16 = [p.grad for p in getattr(bf16, name).parameters()]
        assert cosine(grads32, grads16) > 0.99, name
        assert all(g.dtype == torch.float32 for g in grads16)
    state = bf16.state_dict()
    tensors = [t for part in ("actor", "critic") for t in state[part].values() if t.is_floating_point()]
    tensors += [t for s in state["critic_optimizer"]["state"].values() for t in s.values() if t.is_floating_point()]
    assert tensors and all(t.dtype == torch.float32 for t in tensors)


def test_sac_learns_the_best_action_of_a_one_step_reward_in_bf16():
    cfg = test_sac.sac_cfg(hidden=(64, 64), learning_rate_actor=3e-4, learning_rate_q=1e-2, auto_alpha=False,
                           alpha=0.01, precision=BF16)
    cfg.model.action_shape = 1
    torch.manual_seed(0)
    policy = SACPolicy(cfg, seed=0)
    for batch in test_sac.one_step_bandit_batches(300):
        policy.learn_mode.forward(batch)
    np.testing.assert_allclose(policy.eval_mode.forward(batch["obs"][:1]), 0.5, atol=0.1)


def test_an_unknown_precision_is_refused_by_name():
    with pytest.raises(ValueError, match=r"cfg\.learn\.precision must be one of fp32, bf16-mixed, got 'fp16'"):
        build(SACPolicy, "fp16")


def test_a_seed_config_without_precision_updates_in_fp32():
    seed_style = test_sac.sac_cfg()  # the seed's configs hold only the fields its middleware read
    assert not hasattr(seed_style.learn, "precision")
    batch = test_sac.make_batch(0)
    outputs = []
    for cfg in (seed_style, test_sac.sac_cfg(precision="fp32"), test_sac.sac_cfg(precision=BF16)):
        torch.manual_seed(0)
        outputs.append(SACPolicy(cfg, seed=0).learn_mode.forward(batch))
    assert outputs[0]["critic_loss"] == outputs[1]["critic_loss"] != outputs[2]["critic_loss"]
    assert outputs[0]["actor_loss"] == outputs[1]["actor_loss"]
