"""The frame of learned exploration bonuses (RND, ICM): estimate, train, normalise, save.

A subclass supplies its networks and two functions of a batch: the raw bonus of each
transition and the training loss. This class does the rest the same way for both:

* ``estimate(batch)`` returns a **new** batch whose ``reward`` is
  ``extrinsic + intrinsic_reward_weight * bonus / std(bonus)``. The input batch, and so
  the replay buffer it came from, is left alone; the learner trains on what is returned.
* ``train(batch)`` takes one optimizer step on the subclass's loss and folds the batch into
  the running statistics: the bonus's spread (the scale above) and, with ``obs_norm``, the
  observations' mean and std (networks see ``clip((obs - mean) / std, -5, 5)``).
* ``state_dict`` holds networks, optimizer and statistics, so checkpoints and ``rlpipe
  resume`` carry the model.

The bonus is divided by a running std, not centred: an unseen state keeps a larger bonus
than a familiar one, batch after batch, whatever else the batch holds. Batches may be numpy
arrays or torch tensors (a seed user's data); ``reward`` comes back as the same kind.
"""
from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from rlpipe.config.encoders import AUTO
from rlpipe.model.encoders import Encoder, EncoderConfig, ObsShape, make_encoder, observation_space
from rlpipe.reward_model.base import BaseRewardModel
from rlpipe.utils.running_stats import RunningMeanStd

OBS_CLIP = 5.0
"""Normalised observations are clipped to ``[-OBS_CLIP, OBS_CLIP]`` (as in the RND paper)."""


class Transitions(NamedTuple):
    """The fields a bonus needs, as tensors on the CPU: observations in their own dtype (float32
    when normalised; the networks' encoders convert them), ``action`` as given."""

    obs: torch.Tensor  # [B, *obs_shape], normalised when obs_norm
    action: torch.Tensor  # [B] or [B, action_dim]
    next_obs: torch.Tensor  # [B, *obs_shape], normalised when obs_norm


def observation_network(obs_shape: ObsShape | spaces.Space[Any], cfg: Any, out_size: int) -> nn.Sequential:
    """The encoder of ``obs_shape``'s observations (a shape or a space) that ``cfg`` (``reward_model``:
    ``encoder``, ``encoder_kwargs``, ``encoder_hidden_size_list``) names, then a linear output layer
    of ``out_size``. A built-in encoder takes the layer as its last (its state-dict names stay a
    plain ``nn.Sequential``'s), a user's encoder comes first in a new one."""
    settings = EncoderConfig(list(cfg.encoder_hidden_size_list), getattr(cfg, "encoder", AUTO),
                             encoder_kwargs=dict(getattr(cfg, "encoder_kwargs", None) or {}))
    encoder, n_features = make_encoder(observation_space(obs_shape), settings)
    head = nn.Linear(n_features, out_size)
    return encoder.append(head) if isinstance(encoder, Encoder) else nn.Sequential(encoder, head)


class IntrinsicRewardModel(BaseRewardModel):
    """Base of :class:`~rlpipe.reward_model.RndRewardModel` and :class:`~rlpipe.reward_model.IcmRewardModel`.

    ``cfg`` is a ``RewardModelConfig`` or any object with ``intrinsic_reward_weight``,
    ``learning_rate`` and ``obs_norm``. Subclasses build their networks, then call
    :meth:`_make_optimizer`.
    """

    def __init__(self, cfg: Any, obs_shape: ObsShape | spaces.Space[Any]) -> None:
        self.weight = float(cfg.intrinsic_reward_weight)
        self._learning_rate = float(cfg.learning_rate)
        self._obs_space = observation_space(obs_shape)
        self._obs_shape = tuple(int(n) for n in self._obs_space.shape or ())
        self._obs_stats = RunningMeanStd(self._obs_shape) if cfg.obs_norm else None
        self._bonus_stats = RunningMeanStd()
        self.train_iter = 0
        self.optimizer: torch.optim.Optimizer | None = None
        self.last_metrics: dict[str, float] = {}
        """Figures of the latest ``estimate`` and ``train`` (intrinsic reward mean/std, loss)."""

    # ---- what a subclass defines ------------------------------------------------------
    @abstractmethod
    def networks(self) -> dict[str, nn.Module]:
        """The model's modules by name (all of them, trained or fixed): checkpointed as they are."""

    @abstractmethod
    def bonus(self, batch: Transitions) -> torch.Tensor:
        """The raw bonus ``[B]`` of each transition (no gradient needed)."""

    @abstractmethod
    def loss(self, batch: Transitions) -> tuple[torch.Tensor, torch.Tensor]:
        """The training loss (scalar, differentiable) and the raw bonus ``[B]`` it implies."""

    def _make_optimizer(self) -> None:
        params = [p for module in self.networks().values() for p in module.parameters() if p.requires_grad]
        self.optimizer = torch.optim.Adam(params, lr=self._learning_rate)

    # ---- the reward-model surface -------------------------------------------------------
    def estimate(self, train_data: Mapping[str, Any]) -> dict[str, Any]:
        """A copy of ``train_data`` with ``reward + weight * bonus / std(bonus)``; the input is unchanged."""
        with torch.no_grad():
            raw = self.bonus(self._transitions(train_data))
        intrinsic = raw / self._bonus_stats.std.to(raw.dtype)
        self.last_metrics["intrinsic_reward_mean"] = float(intrinsic.mean())
        self.last_metrics["intrinsic_reward_std"] = float(intrinsic.std(unbiased=False))
        reward = train_data["reward"]
        if isinstance(reward, torch.Tensor):
            mixed: Any = reward + self.weight * intrinsic.to(reward.device, reward.dtype)
        else:
            reward = np.asarray(reward)
            mixed = (reward + self.weight * intrinsic.numpy()).astype(reward.dtype, copy=False)
        return {**train_data, "reward": mixed}

    def train(self, data: Mapping[str, Any]) -> None:
        """One optimizer step on ``data`` (a batch of transitions); statistics updated first."""
        if self.optimizer is None:
            raise RuntimeError(f"{type(self).__name__} must call _make_optimizer() after building its networks")
        if self._obs_stats is not None:
            self._obs_stats.update(_observations(data["next_obs"]).to(torch.float32))
        loss, raw = self.loss(self._transitions(data))
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        self._bonus_stats.update(raw.detach())
        self.train_iter += 1
        self.last_metrics["reward_model_loss"] = float(loss.detach())

    # ---- helpers ---------------------------------------------------------------------------
    def _transitions(self, data: Mapping[str, Any]) -> Transitions:
        obs, next_obs = _observations(data["obs"]), _observations(data["next_obs"])
        shape = self._obs_shape
        if tuple(obs.shape[-len(shape):]) != shape:
            size = shape[0] if len(shape) == 1 else shape
            raise ValueError(f"{type(self).__name__} expects observations of size {size}, got shape {tuple(obs.shape)}")
        if self._obs_stats is not None:  # statistics of float features
            obs = self._obs_stats.normalize(obs.to(torch.float32), OBS_CLIP)
            next_obs = self._obs_stats.normalize(next_obs.to(torch.float32), OBS_CLIP)
        return Transitions(obs, torch.as_tensor(data["action"]), next_obs)

    def state_dict(self) -> dict[str, Any]:
        """Networks, optimizer, running statistics and the update counter."""
        return {
            "networks": {name: module.state_dict() for name, module in self.networks().items()},
            "optimizer": None if self.optimizer is None else self.optimizer.state_dict(),
            "obs_stats": None if self._obs_stats is None else self._obs_stats.state_dict(),
            "bonus_stats": self._bonus_stats.state_dict(),
            "train_iter": self.train_iter,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore everything :meth:`state_dict` returned."""
        for name, module in self.networks().items():
            module.load_state_dict(state["networks"][name])
        if self.optimizer is not None and state["optimizer"] is not None:
            self.optimizer.load_state_dict(state["optimizer"])
        if self._obs_stats is not None and state["obs_stats"] is not None:
            self._obs_stats.load_state_dict(state["obs_stats"])
        self._bonus_stats.load_state_dict(state["bonus_stats"])
        self.train_iter = int(state["train_iter"])


def _observations(values: Any) -> torch.Tensor:
    """Observations as a CPU tensor in their own dtype."""
    return torch.as_tensor(values).detach().cpu()
