"""What the actor-critic policies (SAC, TD3, DDPG, CrossQ) share: one optimizer step, Polyak
averaging, critics frozen for the actor step, and :class:`ActorCriticPolicy`, the frame around
each update rule (on :class:`~rlpipe.policy.frame.PolicyFrame`)."""
from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from rlpipe.model.continuous import Actor
from rlpipe.policy.frame import ArrayLike, Observation, PolicyFrame, TransitionBatch, model_shapes
from rlpipe.policy.streams import RandomStreams
from rlpipe.utils.running_stats import RunningMeanStd

OBS_NORM_CLIP = 5.0
"""With ``model.obs_norm`` the networks see ``clip((obs - mean) / std, -5, 5)`` (the HER paper's clip)."""


def check_model_cfg(model_cfg: Any) -> tuple[spaces.Space[Any], int, list[int], dict[str, Any]]:
    """``(observation space, action_shape, hidden sizes, encoder)`` from ``cfg.model``, which must know the
    env's sizes; ``encoder`` holds the networks' ``encoder`` and ``encoder_kwargs`` arguments (absent, as in
    the seed's configs: ``auto``, none)."""
    obs_shape, action_shape = model_shapes(model_cfg)
    encoder = {"encoder": getattr(model_cfg, "encoder", "auto"),
               "encoder_kwargs": getattr(model_cfg, "encoder_kwargs", None)}
    return obs_shape, action_shape, list(model_cfg.encoder_hidden_size_list), encoder


def target_theta_of(learn_cfg: Any) -> float:
    if learn_cfg.target_theta is None:
        raise ValueError("cfg.learn.target_theta must be set: actor-critic targets are Polyak-averaged every step")
    return float(learn_cfg.target_theta)


def soft_update_(target: Sequence[torch.Tensor], online: Sequence[torch.Tensor], theta: float) -> None:
    """``target <- (1 - theta) * target + theta * online``, in place, for every pair."""
    with torch.no_grad():
        torch._foreach_lerp_(list(target), list(online), theta)


def gaussian_noise(like: torch.Tensor, sigma: float, generator: torch.Generator) -> torch.Tensor:
    """``N(0, sigma^2)`` noise shaped as ``like``, drawn from ``generator``."""
    return sigma * torch.randn(like.shape, generator=generator, device=like.device, dtype=like.dtype)


def explore_with_noise(action: torch.Tensor, sigma: float, generator: torch.Generator) -> torch.Tensor:
    """``clip(action + N(0, sigma^2), -1, 1)`` (``action`` itself when ``sigma`` is 0): deterministic
    actors' exploration."""
    if sigma <= 0.0:
        return action
    return (action + gaussian_noise(action, sigma, generator)).clamp_(-1.0, 1.0)


@contextmanager
def frozen(module: nn.Module) -> Iterator[None]:
    """Stop ``module``'s parameters from requiring grad: gradients still flow through its
    inputs, but no weight gradients are computed (the actor step through the critics)."""
    module.requires_grad_(False)
    try:
        yield
    finally:
        module.requires_grad_(True)


@contextmanager
def training(module: nn.Module) -> Iterator[None]:
    """Put ``module`` in training mode (batch statistics, for batch renormalisation) and back
    to the mode it was in."""
    was_training = module.training
    module.train(True)
    try:
        yield
    finally:
        module.train(was_training)


class ActorCriticPolicy(PolicyFrame):
    """The frame of SAC, TD3, DDPG and CrossQ around their update rule.

    On top of :class:`~rlpipe.policy.frame.PolicyFrame` (device, counter, modes, batches, state
    dicts, ``learn.precision``) it reads ``model.obs_norm`` and owns the two torch generators
    (``collect`` and ``learn`` of :class:`~rlpipe.policy.streams.RandomStreams`) and the
    observation statistics.

    Observation normalisation (``model.obs_norm``; absent means off). Every network sees
    observations normalised by running statistics of the observations of the learning
    batches, updated before each update; with HER they include the relabelled goals, the
    goals the critics learn about (as in the HER paper). Goal-reaching robots need it: their
    positions differ by centimetres around a metre (SB3's zoo normalises for them too).
    The statistics are of float features, so normalised observations are float32 before the
    encoders see them.

    A subclass builds its networks and optimizers (an :class:`~rlpipe.model.continuous.Actor`, whose
    ``deterministic(obs)`` evaluation acts with), names each checkpointed one in :attr:`checkpointed`, and defines
    ``_forward_learn`` and ``_forward_collect``.
    """

    acting: tuple[str, ...] = ("actor",)
    actor: Actor

    def __init__(self, cfg: Any, seed: int) -> None:
        super().__init__(cfg, seed)
        obs_norm = bool(getattr(cfg.model, "obs_norm", False))
        self._obs_stats = RunningMeanStd(check_model_cfg(cfg.model)[0].shape or ()) if obs_norm else None

    def _make_rng(self, seed: int) -> RandomStreams:
        """``collect`` (exploration) and ``learn`` (the update's noise), torch generators on the device."""
        return RandomStreams(seed, epsilon=False, device=self._device)

    @torch.inference_mode()
    def _forward_eval(self, obs: ArrayLike) -> np.ndarray:
        """The actor's deterministic action (``tanh(mean)`` of SAC's, ``mu(s)`` of TD3's, IQL's mean),
        np.float32 ``[N, action_dim]``."""
        return self.actor.deterministic(self._obs(obs)).cpu().numpy()

    def _obs(self, obs: ArrayLike) -> Observation:
        """Observations as the networks take them: on the device, normalised with ``obs_norm``."""
        return self._normalized(self._observations(obs))

    def _normalized(self, obs: Observation) -> Observation:
        if self._obs_stats is None:
            return obs
        assert isinstance(obs, torch.Tensor), "model.obs_norm normalises flat observations"
        return self._obs_stats.normalize(obs.to(torch.float32), OBS_NORM_CLIP)

    def _learn_batch(self, batch: Mapping[str, ArrayLike]) -> TransitionBatch:
        """The learning batch as tensors; with ``obs_norm`` its observations update the statistics
        first, then both ``obs`` and ``next_obs`` are normalised."""
        b = super()._learn_batch(batch)
        if self._obs_stats is None:
            return b
        assert isinstance(b.obs, torch.Tensor), "model.obs_norm normalises flat observations"
        obs = b.obs.to(torch.float32)
        self._obs_stats.update(obs)
        return b._replace(obs=self._normalized(obs), next_obs=self._normalized(b.next_obs))

    def state_dict(self) -> dict[str, Any]:
        """The frame's state (parts, update counter, both generators) and, with ``obs_norm``, the
        observation statistics."""
        state = super().state_dict()
        if self._obs_stats is not None:
            state["obs_stats"] = self._obs_stats.state_dict()
        return state

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore everything :meth:`state_dict` returned."""
        if self._obs_stats is not None and "obs_stats" not in state_dict:
            raise ValueError("the policy normalises observations (model.obs_norm) but the state has no obs_stats")
        super().load_state_dict(state_dict)
        if self._obs_stats is not None:
            self._obs_stats.load_state_dict(state_dict["obs_stats"])

    def acting_state_dict(self) -> dict[str, Any]:
        """What ``collect_mode`` acts with: the actor and, with ``obs_norm``, the observation
        statistics (what a remote collector needs; no critic, optimizer or generator)."""
        state = super().acting_state_dict()
        if self._obs_stats is not None:
            state["obs_stats"] = self._obs_stats.state_dict()
        return state

    def load_acting_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Take what :meth:`acting_state_dict` returned; the rest (critics, generators, ...) stays."""
        super().load_acting_state_dict(state_dict)
        if self._obs_stats is not None:
            self._obs_stats.load_state_dict(state_dict["obs_stats"])
