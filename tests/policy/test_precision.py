"""``learn.precision=bf16-mixed``: every policy's updates with bfloat16 matrix products."""
import numpy as np
import pytest
import torch

from rlpipe.config import load_config
from rlpipe.policy import C51Policy, CrossQPolicy, DDPGPolicy, DQNPolicy, QRDQNPolicy, SACPolicy, TD3Policy
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


PIXELS = (4, 10, 10)
"""MinAtar's observations: the DQN family's bfloat16 updates run through a convolution."""
Q_FAMILY = {"dqn": DQNPolicy, "c51": C51Policy, "qrdqn": QRDQNPolicy}


def build_q(kind: str, precision: str, **model):
    """A dueling ``kind`` policy on MinAtar-sized images; the same initial weights for any precision."""
    cfg = load_config({"policy": {
        "type": kind, "discount_factor": 0.9,
        "model": {"obs_shape": list(PIXELS), "obs_dtype": "uint8", "obs_high": 1, "action_shape": 3,
                  "encoder": "minatar_cnn", "dueling": True, **model},
        "learn": {"precision": precision, "learning_rate": 1e-3},
    }}).policy
    torch.manual_seed(0)
    return Q_FAMILY[kind](cfg, seed=0)


def pixel_batch(seed: int, size: int = 64) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "obs": rng.integers(0, 2, size=(size, *PIXELS), dtype=np.uint8),
        "next_obs": rng.integers(0, 2, size=(size, *PIXELS), dtype=np.uint8),
        "action": rng.integers(3, size=size),
        "reward": rng.normal(size=size).astype(np.float32),
        "terminated": (rng.random(size) < 0.2).astype(np.float32),
    }


@pytest.mark.parametrize(("kind", "model"), [("dqn", {}), ("c51", {"noisy": True}), ("qrdqn", {"num_quantiles": 16})])
def test_a_bf16_q_update_follows_the_fp32_one_with_float32_values(kind, model):
    fp32, bf16 = build_q(kind, "fp32", **model), build_q(kind, BF16, **model)
    batch = pixel_batch(0)
    out32, out16 = fp32.learn_mode.forward(batch), bf16.learn_mode.forward(batch)

    assert out16["total_loss"] == pytest.approx(out32["total_loss"], rel=0.05)
    assert out16["priority"].dtype == np.float32  # the heads hand back float32 under autocast
    np.testing.assert_allclose(out16["priority"], out32["priority"], rtol=0.1, atol=0.02)
    grads32 = [p.grad for p in fp32.model.parameters() if p.grad is not None]
    grads16 = [p.grad for p in bf16.model.parameters() if p.grad is not None]
    assert len(grads16) == len(grads32) > 0
    assert cosine(grads32, grads16) > 0.99
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert bf16.model(torch.as_tensor(batch["obs"])).dtype == torch.float32
    state = bf16.state_dict()
    tensors = [t for part in ("model", "target_model") for t in state[part].values() if t.is_floating_point()]
    tensors += [t for s in state["optimizer"]["state"].values() for t in s.values() if t.is_floating_point()]
    assert tensors and all(t.dtype == torch.float32 for t in tensors)


def test_dqn_learns_which_image_pays_in_bf16():
    """A one-step bandit on images: action ``i`` pays 1 where channel ``i`` is lit, else 0."""
    policy = build_q("dqn", BF16)
    rng = np.random.default_rng(0)
    for _ in range(150):  # seeds 0-4 of the data all had it right by 50 updates
        lit = rng.integers(3, size=64)
        obs = np.zeros((64, *PIXELS), dtype=np.uint8)
        obs[np.arange(64), lit] = 1
        action = rng.integers(3, size=64)
        policy.learn_mode.forward({"obs": obs, "next_obs": obs, "action": action,
                                   "reward": (action == lit).astype(np.float32), "terminated": np.ones(64, np.float32)})
    probe = np.zeros((3, *PIXELS), dtype=np.uint8)
    probe[np.arange(3), np.arange(3)] = 1
    np.testing.assert_array_equal(policy.eval_mode.forward(probe), [0, 1, 2])


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
