"""``rlpipe.load(path).predict(obs)``: a trained run used outside training."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest
import torch

import rlpipe
from rlpipe.cli.main import main
from rlpipe.config import ConfigError, load_config
from rlpipe.entry.agent import Agent
from rlpipe.entry.evaluate import load_policy
from rlpipe.recipes.build import make_policy
from rlpipe.utils.checkpoint import load_checkpoint

COMMON = ["run.progress=false", "policy.collect.n_sample=32", "policy.learn.batch_size=16",
          "policy.eval.evaluator.eval_freq=20", "env.n_evaluator_episode=2", "env.evaluator_env_num=2",
          "run.save_freq=1000", "run.log_freq=10", "run.max_env_step=128"]
SMALL_NET = ["policy.model.encoder_hidden_size_list=[16,16]"]
RUNS = {
    "cartpole-dqn": ["policy.learn.update_per_collect=2"],
    "pendulum-sac": ["policy.random_collect_size=32", *SMALL_NET],
    "bitflip-her-dqn": ["env.env_kwargs.n_bits=4", "policy.collect.n_episode=2", "env.n_evaluator_episode=2"],
}


@pytest.fixture(scope="module", params=sorted(RUNS))
def run(request, tmp_path_factory) -> tuple[str, Path]:
    preset = request.param
    run_dir = tmp_path_factory.mktemp("agent") / preset
    assert main(["train", preset, *COMMON, *RUNS[preset], "--run-dir", str(run_dir)]) == 0
    return preset, run_dir


def stack(observations: list) -> object:
    """A batch of env observations, as a vector env would give them."""
    if isinstance(observations[0], dict):
        return {key: np.stack([o[key] for o in observations]) for key in observations[0]}
    return np.stack(observations)


def test_predict_maps_one_observation_and_a_batch_to_actions_of_the_env(run):
    _, run_dir = run
    agent = rlpipe.load(run_dir)
    env = gym.make(agent.cfg.env.env_id, **agent.cfg.env.env_kwargs)
    observations = [env.reset(seed=i)[0] for i in range(5)]
    single = agent.predict(observations[0])
    assert env.action_space.contains(np.asarray(single, dtype=env.action_space.dtype))
    batch = agent.predict(stack(observations))
    assert len(batch) == 5
    assert all(env.action_space.contains(np.asarray(a, dtype=env.action_space.dtype)) for a in batch)
    assert np.array_equal(batch[0], single)  # deterministic by default
    _, reward, *_ = env.step(single)  # the env takes the action as it is
    assert np.isfinite(reward)
    env.close()


def test_a_lone_checkpoint_is_enough(run, tmp_path):
    _, run_dir = run
    lone = tmp_path / "agent.pth.tar"
    lone.write_bytes((run_dir / "ckpt" / "final.pth.tar").read_bytes())
    agent = rlpipe.load(lone)
    reference = rlpipe.load(run_dir / "ckpt" / "final.pth.tar")
    observation = agent.observation_space.sample()
    assert np.array_equal(agent.predict(observation), reference.predict(observation))


def tensors(state: object) -> list[torch.Tensor]:
    """The tensors in a nested state dict."""
    if isinstance(state, torch.Tensor):
        return [state]
    if isinstance(state, dict):
        return [t for value in state.values() for t in tensors(value)]
    return []


def test_a_run_trained_on_a_gpu_acts_on_the_cpu_of_a_machine_without_one(run, monkeypatch):
    _, run_dir = run
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    path = run_dir / "ckpt" / "final.pth.tar"
    state = load_checkpoint(path)
    cfg = load_config(state["config"])
    trained_on_gpu = cfg.model_copy(update={"policy": cfg.policy.model_copy(update={"cuda": True})})
    policy = load_policy(trained_on_gpu, state, path)  # device "auto"
    assert {tensor.device.type for tensor in tensors(policy.state_dict())} == {"cpu"}
    with pytest.raises(ConfigError, match=r"'policy.cuda' is true but torch .* sees no CUDA device"):
        load_policy(trained_on_gpu, state, path, device="cuda")
    with pytest.raises(ValueError, match=r"^device 'gpu' is not one of auto, cpu, cuda$"):
        rlpipe.load(run_dir, device="gpu")


def test_predict_names_a_wrong_observation_shape():
    cfg = load_config("cartpole-dqn", ["policy.model.obs_shape=4", "policy.model.action_shape=2"])
    agent = Agent(cfg, make_policy(cfg))
    with pytest.raises(ValueError, match=r"shape \(4,\) or a batch \[N, \*\(4,\)\], got shape \(3,\)"):
        agent.predict(np.zeros(3, dtype=np.float32))


def test_load_names_a_missing_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="no run directory or checkpoint at"):
        rlpipe.load(tmp_path / "nothing")


def test_predict_names_the_missing_keys_of_a_dict_observation():
    from tests.goal_envs import POINT_ID

    cfg = load_config({"env": {"env_id": POINT_ID}, "policy": {
        "type": "sac", "model": {"obs_shape": 7, "action_shape": 2}, "learn": {"target_theta": 0.005}}})
    agent = Agent(cfg, make_policy(cfg))
    good = agent.observation_space.sample()
    assert agent.predict(good).shape == (2,)
    with pytest.raises(ValueError, match=r"keys \['achieved_goal', 'desired_goal', 'observation'\]; "
                                         r"\['desired_goal'\] missing"):
        agent.predict({key: value for key, value in good.items() if key != "desired_goal"})


def test_acting_outside_training_uses_the_runs_torch_threads_and_puts_the_callers_back(run, monkeypatch, tmp_path):
    """predict, ``rlpipe eval`` and ``rlpipe dataset rollout`` act on ``run.torch_threads`` (1): torch's
    default of one thread per core made a small network's step 100x slower on a busy machine. The
    caller's own count comes back after."""
    from rlpipe.entry import evaluate
    from rlpipe.tools import datasets

    _, run_dir = run
    agent = rlpipe.load(run_dir)
    seen: list[int] = []

    def spying(act):
        def spy(*args, **kwargs):
            seen.append(torch.get_num_threads())
            return act(*args, **kwargs)
        return spy

    monkeypatch.setattr(agent.policy, "eval_mode", SimpleNamespace(forward=spying(agent.policy.eval_mode.forward)))
    monkeypatch.setattr(evaluate, "evaluate_episodes", spying(evaluate.evaluate_episodes))
    monkeypatch.setattr(datasets, "_play", spying(datasets._play))
    callers = torch.get_num_threads()
    torch.set_num_threads(agent.cfg.run.torch_threads + 1)
    try:
        agent.predict(agent.observation_space.sample())
        assert torch.get_num_threads() == agent.cfg.run.torch_threads + 1
        evaluate.evaluate_run(run_dir, episodes=1)
        assert torch.get_num_threads() == agent.cfg.run.torch_threads + 1
        datasets.rollout_dataset(run_dir, tmp_path / "played", 1, num_envs=1)
        assert torch.get_num_threads() == agent.cfg.run.torch_threads + 1
    finally:
        torch.set_num_threads(callers)
    assert seen == [agent.cfg.run.torch_threads] * 3
