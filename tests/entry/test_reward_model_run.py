"""Learned reward models through ``rlpipe train``: they train, reach the metrics, survive resume."""
from __future__ import annotations

import pytest

from rlpipe.config import ConfigError, load_config
from rlpipe.entry import train
from rlpipe.framework.middleware import latest_checkpoint
from rlpipe.recipes.build import build_parts
from rlpipe.utils.metrics import read_metrics

SHORT = ["env.env_kwargs.size=6", "run.max_env_step=600", "run.progress=false", "run.log_freq=20",
         "run.save_freq=50", "policy.eval.evaluator.eval_freq=50"]


@pytest.mark.parametrize("preset", ["deepsea-dqn-rnd", "deepsea-dqn-icm"])
def test_the_reward_model_trains_during_a_run_and_is_checkpointed(preset, tmp_path):
    cfg = load_config(preset, SHORT)
    with build_parts(cfg) as parts:  # the same seed builds the same initial reward model
        initial = {name: {k: v.clone() for k, v in net.state_dict().items()}
                   for name, net in parts.reward_model.networks().items()}
    train(cfg, tmp_path / "run")

    saved = latest_checkpoint(tmp_path / "run").state["reward_model"]
    assert saved["train_iter"] > 0
    trained = [name for name, state in initial.items()
               if any(not state[k].equal(saved["networks"][name][k]) for k in state)]
    assert trained == (["predictor"] if preset == "deepsea-dqn-rnd" else ["encoder", "inverse", "forward_model"])

    records = [r for r in read_metrics(tmp_path / "run") if r["kind"] == "train"]
    assert {"intrinsic_reward_mean", "intrinsic_reward_std", "reward_model_loss", "train_success_rate",
            "train_episode_return_mean"} <= set(records[-1])
    evals = [r for r in read_metrics(tmp_path / "run") if r["kind"] == "eval"]
    assert all(0.0 <= r["success_rate"] <= 1.0 for r in evals)  # DeepSea reports is_success


def test_resume_continues_the_reward_model(tmp_path):
    run = tmp_path / "run"
    train(load_config("deepsea-dqn-rnd", SHORT), run)
    first = latest_checkpoint(run).state["reward_model"]["train_iter"]
    train(load_config("deepsea-dqn-rnd", [*SHORT, "run.max_env_step=1200"]), run, resume=True)
    assert latest_checkpoint(run).state["reward_model"]["train_iter"] > first


def test_resuming_a_run_without_reward_model_with_one_is_one_line(tmp_path):
    run = tmp_path / "run"
    train(load_config("deepsea-dqn", SHORT), run)
    with pytest.raises(ValueError, match=r"holds no reward model, but this run has one \(config key 'reward_model'\)"):
        train(load_config("deepsea-dqn-rnd", [*SHORT, "run.max_env_step=1200"]), run, resume=True)


@pytest.mark.parametrize(("override", "message"), [
    ({"reward_model": {"type": "rdn"}}, r"config key 'reward_model.type': Input should be 'rnd' or 'icm'"),
    ({"reward_model": {"type": "icm"}, "policy": {"type": "sac", "learn": {"target_theta": 0.005}}},
     r"reward_model.type 'icm' needs discrete actions; policy.type 'sac'"),
    ({"reward_model": {"type": "rnd"}, "policy": {"collect": {"n_episode": 2}, "other": {"her": {}}}},
     r"reward_model is not supported together with policy.other.her"),
])
def test_bad_reward_model_settings_are_one_line_naming_the_key(override, message):
    with pytest.raises(ConfigError, match=message) as err:
        load_config(override)
    assert "\n" not in str(err.value)


def test_the_deepsea_presets_differ_only_in_their_reward_model():
    # The comparison is fair only if RND, ICM and plain DQN run the same DQN, schedule
    # and budget; the prioritised replay that lets RND's bonus reach Q is part of that DQN.
    configs = {name: load_config(name).model_dump() for name in ("deepsea-dqn", "deepsea-dqn-rnd", "deepsea-dqn-icm")}
    for cfg in configs.values():
        assert cfg["policy"]["priority"] is True
        assert cfg["run"]["max_env_step"] == 40000 and cfg["env"]["env_kwargs"] == {"size": 20}
    ignored = ("exp_name", "description", "reward_model")
    shared = [{k: v for k, v in cfg.items() if k not in ignored} for cfg in configs.values()]
    assert shared[0] == shared[1] == shared[2]
    assert [cfg["reward_model"] and cfg["reward_model"]["type"] for cfg in configs.values()] == [None, "rnd", "icm"]
