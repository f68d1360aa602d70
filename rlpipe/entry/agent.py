"""Use a trained policy outside training: ``agent = rlpipe.load(path)``, ``agent.predict(obs)``.

``predict`` takes what the environment itself gives (one observation or a batch; a dict for
dict-observation envs) and returns what it takes (actions in its own action space). The
conversions are the ones training used: the observation and action wrappers of the env
factory (goal flattening, MiniGrid image flattening, ``RescaleAction``) are applied by
calling their ``observation``/``action`` methods, so a run and its agent can never disagree.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import gymnasium as gym
import numpy as np

from rlpipe.config import Config, load_config
from rlpipe.config.algorithms import ALGORITHMS, Exploration
from rlpipe.entry.evaluate import ChosenCheckpoint, default_checkpoint, load_policy
from rlpipe.envs.families import family_of
from rlpipe.policy import Policy
from rlpipe.policy.base import RecurrentPolicy
from rlpipe.recipes.build import acting_threads
from rlpipe.recipes.envs import make_env_factory
from rlpipe.utils.checkpoint import CheckpointError, load_checkpoint, required_seal

logger = logging.getLogger(__name__)


def _wrappers(env: gym.Env) -> list[gym.Wrapper]:
    """``env``'s wrapper stack, outermost first."""
    stack = []
    while isinstance(env, gym.Wrapper):
        stack.append(env)
        env = env.env
    return stack


def _observation_boundary(stack: list[gym.Wrapper], own: tuple[type[gym.Wrapper], ...]) -> gym.Wrapper | None:
    """The outermost wrapper of ``stack`` (outermost first) whose observations :meth:`Agent.predict`
    takes: one of ``own``, whose observations are the env family's as rlpipe holds them (MinAtar's
    ``uint8 [C, 10, 10]``, :attr:`~rlpipe.envs.families.EnvFamily.agent_observations`), or one that
    changes observations but is no ``ObservationWrapper`` (its observations depend on earlier steps,
    as a frame stack's do, so no function of one raw observation can stand in for it)."""
    for wrapper in stack:
        if isinstance(wrapper, own):
            return wrapper
        changes = wrapper.observation_space != wrapper.env.observation_space
        if changes and not isinstance(wrapper, gym.ObservationWrapper):
            return wrapper
    return None


class Agent:
    """A policy with its config, ready to act: :meth:`predict` maps env observations to env actions."""

    def __init__(self, cfg: Config, policy: Policy, checkpoint: ChosenCheckpoint | None = None) -> None:
        self.cfg = cfg
        self.policy = policy
        self.checkpoint = checkpoint
        """The checkpoint the agent was loaded from and why that one (None: built from a policy in memory)."""
        env = make_env_factory(cfg)()
        try:
            stack = _wrappers(env)
            boundary = _observation_boundary(stack, family_of(cfg.env.env_id).agent_observations)
            if boundary is not None:  # e.g. a frame stack: predict takes what it returns
                stack = stack[:stack.index(boundary)]
            self.observation_space: gym.Space = (env.unwrapped if boundary is None else boundary).observation_space
            """What :meth:`predict` takes: the env's own observations, or those of its outermost wrapper
            that keeps state between steps (Atari's preprocessing and frame stack: the stacked frames)
            or that makes them rlpipe's (MinAtar's ``uint8 [C, 10, 10]``)."""
            self.action_space: gym.Space = env.unwrapped.action_space
            """The env's own action space (what :meth:`predict` returns)."""
            self.observation_wrappers: tuple[gym.ObservationWrapper, ...] = tuple(
                w for w in reversed(stack) if isinstance(w, gym.ObservationWrapper))
            """The conversions from what :meth:`predict` takes to what the policy sees, innermost first
            (goal flattening, MiniGrid images): the env factory's own wrappers, applied by calling them."""
            self.action_wrappers: tuple[gym.ActionWrapper, ...] = tuple(
                w for w in stack if isinstance(w, gym.ActionWrapper))
            """The conversions from the policy's actions to the env's, outermost first (``RescaleAction``)."""
        finally:
            env.close()

    @property
    def recurrent(self) -> bool:
        """Whether the agent remembers (a recurrent core: :meth:`predict` takes and returns its state)."""
        return ALGORITHMS[self.cfg.policy.type].sequences

    def predict(self, obs: Any, deterministic: bool = True, state: Any = None) -> Any:
        """Actions for one observation (returns one action) or a batch (returns ``[N, ...]``).

        ``deterministic=False`` acts as in training: SAC samples, TD3/DDPG add their noise, DQN
        (any algorithm exploring epsilon-greedily) is epsilon-greedy with ``policy.other.eps.end``.

        A recurrent agent (:attr:`recurrent`, r2d2) returns ``(actions, state)``: pass that state
        back with the next observation of the same episode, and None (a fresh state) at an
        episode's start. ``state`` is float32 ``[N, S]`` (``[S]`` for one observation).
        """
        rows, single = self._rows(obs)
        policy_obs = np.stack([self._to_policy(row) for row in rows])  # in its own dtype: the encoder converts
        if state is not None and not self.recurrent:
            raise ValueError(f"predict: state is for recurrent agents; policy.type '{self.cfg.policy.type}' has "
                             "no memory")
        with acting_threads(self.cfg):
            if self.recurrent:
                return self._predict_with_memory(policy_obs, single, deterministic, state)
            if deterministic:
                actions = self.policy.eval_mode.forward(policy_obs)
            elif ALGORITHMS[self.cfg.policy.type].exploration_of(self.cfg.policy) is Exploration.EPSILON:
                actions = self.policy.collect_mode.forward(policy_obs, eps=self.cfg.policy.other.eps.end)
            else:
                actions = self.policy.collect_mode.forward(policy_obs)
        env_actions = [self._to_env(action) for action in actions]
        return env_actions[0] if single else np.stack(env_actions)

    def _predict_with_memory(self, policy_obs: np.ndarray, single: bool, deterministic: bool,
                             state: Any) -> tuple[Any, np.ndarray]:
        """:meth:`predict` of a recurrent agent: actions from ``state`` (None: a fresh one), and the next state."""
        policy, n = cast(RecurrentPolicy, self.policy), len(policy_obs)
        if state is None:
            start = policy.initial_state(n)
        else:
            start = np.asarray(state, dtype=np.float32).reshape(n, -1) if single else np.asarray(state, np.float32)
            size = int(policy.initial_state(1).shape[1])
            if start.shape != (n, size):
                raise ValueError(f"predict: state must be float32 [{n}, {size}] for {n} observation(s) (the state "
                                 f"predict returned), got shape {tuple(np.shape(state))}")
        eps = 0.0 if deterministic else self.cfg.policy.other.eps.end
        actions, after = policy.act(policy_obs, start, eps)
        env_actions = [self._to_env(action) for action in actions]
        next_state = after.numpy(force=True).astype(np.float32)
        if single:
            return env_actions[0], next_state[0]
        return np.stack(env_actions), next_state

    def _rows(self, obs: Any) -> tuple[Sequence[Any], bool]:
        """Split ``obs`` into single observations; also say whether it was one."""
        space = self.observation_space
        if isinstance(space, gym.spaces.Dict):
            if isinstance(obs, Mapping):
                missing = sorted(set(space.spaces) - set(obs))
                if missing:
                    raise ValueError(f"predict expects a dict observation with keys {sorted(space.spaces)}; "
                                     f"{missing} missing")
                key = next(iter(space.spaces))
                batched = np.ndim(obs[key]) > len(space[key].shape or ())
                if not batched:
                    return [obs], True
                return [{k: np.asarray(v)[i] for k, v in obs.items()} for i in range(len(obs[key]))], False
            return list(obs), False
        array = np.asarray(obs)
        shape = space.shape or ()
        if array.shape == shape:
            return [array], True
        if array.shape[1:] == shape:
            return list(array), False
        raise ValueError(f"predict expects an observation of shape {shape} or a batch [N, *{shape}], "
                         f"got shape {array.shape}")

    def _to_policy(self, obs: Any) -> np.ndarray:
        for wrapper in self.observation_wrappers:  # innermost first, as the env applies them
            obs = wrapper.observation(obs)
        return np.asarray(obs)

    def _to_env(self, action: Any) -> Any:
        for wrapper in self.action_wrappers:  # outermost first: the policy's action goes in at the top
            action = wrapper.action(action)
        return action


def load(path: str | Path, allow_unsealed: bool = False, device: str = "auto") -> Agent:
    """The agent of a run directory or of a checkpoint file, acting on ``device``: ``auto`` (the GPU
    when the run trained on one and one is here, else the CPU), ``cpu`` or ``cuda``.

    A run directory gives its best evaluation's checkpoint when that evaluation came after training
    began, else its final one (:func:`~rlpipe.entry.evaluate.default_checkpoint`); ``agent.checkpoint``
    says which it took and why, and so does one INFO log line.

    A checkpoint written by ``rlpipe train`` carries its resolved config, so a lone
    ``.pth.tar`` is enough; older checkpoints fall back to the ``config.yaml`` of the run
    directory they sit in. The checkpoint must be sealed (signed, when its run's checkpoints
    are); ``allow_unsealed`` loads one from before the seal, unverified, with a warning (see
    :mod:`rlpipe.utils.checkpoint`).
    """
    path = Path(path)
    if path.is_dir():
        chosen = default_checkpoint(path, allow_unsealed)
        logger.info("rlpipe.load(%s): took %s", path, chosen.reason)
    elif path.is_file():
        chosen = ChosenCheckpoint(path, "the checkpoint file given")
    else:
        raise FileNotFoundError(f"no run directory or checkpoint at {path}")
    checkpoint = chosen.path
    state = load_checkpoint(checkpoint, allow_unsealed=allow_unsealed, run_seal=required_seal(checkpoint))
    if "config" in state:
        cfg = load_config(state["config"])
    else:
        config_path = checkpoint.parent.parent / "config.yaml"
        if not config_path.is_file():
            raise CheckpointError(f"checkpoint {checkpoint} holds no config and there is no {config_path}")
        cfg = load_config(config_path)
    return Agent(cfg, load_policy(cfg, state, checkpoint, device), chosen)
