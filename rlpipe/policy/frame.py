"""The frame every policy shares (the DQN family and the actor-critics): the device, the
settings of every update (discount, n-step, gradient clipping, Adam's betas, the arithmetic
of the products), the update counter, the random streams, the three modes, learning batches
as tensors, and the state dicts.

A family's frame (:class:`~rlpipe.policy.q_learning.QLearningPolicy`,
:class:`~rlpipe.policy.actor_critic.ActorCriticPolicy`) derives from :class:`PolicyFrame`,
builds its networks and optimizers, names them in :attr:`PolicyFrame.checkpointed` and
:attr:`PolicyFrame.acting`, says which optimizer groups each learning-rate key drives
(:meth:`PolicyFrame.learning_rate_groups`, for schedules), and defines the three ``_forward_*``.

Observations travel to the policy's device in their own dtype; the encoder at the front of
each network converts them to float (:mod:`rlpipe.model.encoders`).
"""
from __future__ import annotations

import logging
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, get_args

import numpy as np
import torch
from gymnasium import spaces

from rlpipe.config.schema import Precision
from rlpipe.model.encoders import model_observation_space
from rlpipe.policy.base import PolicyMode
from rlpipe.policy.memory import RecurrentMemory
from rlpipe.policy.optim import adam_betas_of
from rlpipe.policy.streams import RandomStreams
from rlpipe.utils.batch import terminated_of
from rlpipe.utils.precision import bf16_fallback_reason

logger = logging.getLogger(__name__)

ArrayLike = np.ndarray | torch.Tensor
Observation = torch.Tensor | dict[str, torch.Tensor]
"""Observations on the policy's device, in the dtype they came in (a dict of them for dict observations)."""
PRECISIONS: tuple[str, ...] = get_args(Precision)
"""Values of ``learn.precision``."""


class TransitionBatch(NamedTuple):
    """A learning batch as tensors on the policy's device (``B`` rows)."""

    obs: Observation  # [B, *obs_shape], its own dtype
    action: torch.Tensor  # [B] int64 (discrete) or [B, action_dim] float32 in [-1, 1]
    reward: torch.Tensor  # [B]
    next_obs: Observation  # [B, *obs_shape], its own dtype
    terminated: torch.Tensor  # [B], float 1.0 where there is no bootstrap
    value_gamma: torch.Tensor | float  # [B] or the scalar gamma
    weight: torch.Tensor | None  # [B] importance weights


def device_of(cfg: Any) -> torch.device:
    """``cuda`` when ``cfg.cuda`` asks for it and torch sees a device, else the CPU."""
    return torch.device("cuda" if cfg.cuda and torch.cuda.is_available() else "cpu")


def model_shapes(model_cfg: Any) -> tuple[spaces.Space[Any], int]:
    """``(observation space, action_shape)`` from ``cfg.model``, which must know the env's sizes: the
    space of ``obs_shape`` (and, for images, ``obs_dtype`` and ``obs_high``), from which the
    networks choose their encoders."""
    if model_cfg.obs_shape is None or model_cfg.action_shape is None:
        raise ValueError(
            "cfg.model.obs_shape and cfg.model.action_shape must be set (from the env) to build the model"
        )
    return model_observation_space(model_cfg), int(model_cfg.action_shape)


def _tensor(value: ArrayLike, device: torch.device) -> torch.Tensor:
    """``value`` as a tensor on ``device``; a read-only array (a dataset's memory map) is copied first,
    which torch would otherwise share with a warning that writes are undefined."""
    if isinstance(value, np.ndarray) and not value.flags.writeable:
        value = value.copy()
    return torch.as_tensor(value, device=device)


def observations_to(obs: ArrayLike | Mapping[str, ArrayLike], device: torch.device) -> Observation:
    """Observations as tensors on ``device``, keeping their dtype (a ``uint8`` image stays ``uint8``)."""
    if isinstance(obs, Mapping):
        return {key: _tensor(value, device) for key, value in obs.items()}
    return _tensor(obs, device)


def per_sample(name: str, column: torch.Tensor, what: str = "one value per row") -> torch.Tensor:
    """A learning batch's column ``name`` of one value per row as ``[B]``: it may come as ``[B]`` or as
    DI-engine's ``[B, 1]``; any other shape is one line naming the field."""
    if column.dim() == 2 and column.shape[1] == 1:
        return column.squeeze(1)
    if column.dim() != 1:
        raise ValueError(f"batch field '{name}' must hold {what}, [B] or [B, 1]; got shape {tuple(column.shape)}")
    return column


def joined(first: Observation, second: Observation) -> Observation:
    """Two batches of observations as one (rows of ``first``, then of ``second``)."""
    if isinstance(first, dict):
        assert isinstance(second, dict)
        return {key: torch.cat([first[key], second[key]]) for key in first}
    assert isinstance(second, torch.Tensor)
    return torch.cat([first, second])


class PolicyFrame(ABC):
    """The frame of every policy around its update rule.

    It reads ``cuda``, ``discount_factor``, ``nstep``, ``learn.reward_scale`` (absent: 1), ``learn.grad_clip``,
    ``learn.adam_betas`` (absent: Adam's defaults) and ``learn.precision`` (absent: fp32), owns
    the device, the update counter and the random streams (:meth:`_make_rng`,
    :class:`~rlpipe.policy.streams.RandomStreams`), wires
    ``learn_mode`` (under bfloat16 autocast with ``precision: bf16-mixed``), ``collect_mode`` and
    ``eval_mode`` (each with the memory :meth:`_acting_memory` gives: None but for recurrent
    policies), converts learning batches (:meth:`_learn_batch`) and moves observations to the device
    (:meth:`_observations`), and saves and restores everything named in :attr:`checkpointed` and
    :attr:`acting`.

    Under bfloat16 autocast the Q-networks hand back float32 Q-values (their heads cast), so that
    targets, losses and priorities keep float32's digits.
    """

    acting: tuple[str, ...] = ()
    """Attributes (modules) ``collect_mode`` acts with: what a remote collector takes from the learner."""
    checkpointed: tuple[str, ...] = ()
    """Attributes with ``state_dict``/``load_state_dict`` (modules, optimizers) a checkpoint holds."""
    action_dtype: torch.dtype = torch.float32
    """The dtype of the ``action`` column of learning batches."""

    def __init__(self, cfg: Any, seed: int) -> None:
        self._gamma = float(cfg.discount_factor)
        self._nstep = int(cfg.nstep)
        self._reward_scale = float(getattr(cfg.learn, "reward_scale", 1.0))
        if not (math.isfinite(self._reward_scale) and self._reward_scale > 0):
            raise ValueError(f"cfg.learn.reward_scale must be a positive number, got {self._reward_scale}")
        self._grad_clip = None if cfg.learn.grad_clip is None else float(cfg.learn.grad_clip)
        self._adam_betas = adam_betas_of(cfg.learn)
        self._device = device_of(cfg)
        self._train_iter = 0
        self._rng = self._make_rng(seed)
        self.learn_mode = PolicyMode(self._learn_function(cfg.learn))
        self.collect_mode = PolicyMode(self._forward_collect, self._acting_memory())
        self.eval_mode = PolicyMode(self._forward_eval, self._acting_memory())

    @property
    def train_iter(self) -> int:
        """Gradient updates taken so far."""
        return self._train_iter

    def seed(self, seed: int) -> None:
        """Reseed the acting streams (:meth:`~rlpipe.policy.streams.RandomStreams.seed`); the updates'
        stream goes on."""
        self._rng.seed(seed)

    # ---- what a family defines --------------------------------------------------------
    @abstractmethod
    def _make_rng(self, seed: int) -> RandomStreams:
        """The policy's random streams (the ones it draws from), from ``seed`` (``self._device`` is set)."""

    def _learn_function(self, learn_cfg: Any) -> Callable[[Mapping[str, ArrayLike]], dict[str, Any]]:
        """What ``learn_mode.forward`` calls: :meth:`_forward_learn`, under bfloat16 autocast with
        ``learn.precision: bf16-mixed``."""
        return self._learn_under_autocast if self._bf16_mixed(learn_cfg) else self._forward_learn

    def _bf16_mixed(self, learn_cfg: Any) -> bool:
        """Whether the updates run bfloat16 products: ``learn.precision`` (absent means fp32) asks for
        them and the device has native bfloat16 arithmetic (:func:`bf16_fallback_reason`)."""
        precision = getattr(learn_cfg, "precision", "fp32")
        if precision not in PRECISIONS:
            raise ValueError(f"cfg.learn.precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        if precision == "fp32":
            return False
        reason = bf16_fallback_reason(self._device)
        if reason is not None:  # emulated bfloat16 is several times slower than float32, never faster
            logger.warning("learn.precision=bf16-mixed falls back to fp32: %s", reason)
            return False
        return True

    def _learn_under_autocast(self, batch: Mapping[str, ArrayLike]) -> dict[str, Any]:
        """:meth:`_forward_learn` with the matrix products in bfloat16 (``torch.autocast``): the
        parameters, their gradients, the optimizers' state and the losses stay float32."""
        with torch.autocast(self._device.type, dtype=torch.bfloat16):
            return self._forward_learn(batch)

    @abstractmethod
    def _forward_learn(self, batch: Mapping[str, ArrayLike]) -> dict[str, Any]: ...

    def _acting_memory(self) -> RecurrentMemory | None:
        """A new memory for one acting mode, called once for ``collect_mode`` and once for ``eval_mode``
        (so that evaluating never disturbs the collector's states): None, except for a recurrent policy
        (:class:`~rlpipe.policy.memory.RecurrentMemory`). Called before the networks are built."""
        return None

    @abstractmethod
    def learning_rate_groups(self) -> dict[str, list[dict[str, Any]]]:
        """The optimizer parameter groups each learning-rate key of ``cfg.learn`` drives, by key
        (``"learning_rate_q"``). Looked up at each call: loading an optimizer's state replaces its groups."""

    # ---- learning rates ---------------------------------------------------------------
    def set_learning_rate(self, key: str, lr: float) -> None:
        """Set the learning rate ``learn.<key>`` of the next updates (a schedule's value; the
        optimizers' state dicts, and so checkpoints, hold it)."""
        groups = self.learning_rate_groups()
        if key not in groups:
            raise ValueError(f"{type(self).__name__} has no learning rate 'learn.{key}' (it has "
                             f"{', '.join(groups)})")
        for group in groups[key]:
            group["lr"] = lr

    @abstractmethod
    def _forward_collect(self, obs: ArrayLike, *args: Any, **kwargs: Any) -> np.ndarray:
        """Exploring actions for ``obs`` (each family takes its own exploration arguments)."""

    @abstractmethod
    def _forward_eval(self, obs: ArrayLike) -> np.ndarray: ...

    # ---- tensors ----------------------------------------------------------------------
    def _observations(self, obs: ArrayLike | Mapping[str, ArrayLike]) -> Observation:
        """Observations on the policy's device, in their own dtype (the encoders convert them)."""
        return observations_to(obs, self._device)

    def _actions(self, action: torch.Tensor) -> torch.Tensor:
        """A learning batch's ``action`` column in the shape the loss takes (as given, here)."""
        return action

    def _learn_batch(self, batch: Mapping[str, Any]) -> TransitionBatch:
        """A columnar batch as tensors; ``value_gamma`` falls back to ``gamma`` only for 1-step returns.

        The columns of one value per row (``reward``, ``terminated``, ``value_gamma``, ``weight``)
        may be ``[B]`` or DI-engine's ``[B, 1]``; they become ``[B]``. ``reward`` comes times
        ``learn.reward_scale``."""

        def column(name: str, value: Any) -> torch.Tensor:
            return per_sample(name, torch.as_tensor(value, dtype=torch.float32, device=self._device))

        if "value_gamma" in batch:
            value_gamma: torch.Tensor | float = column("value_gamma", batch["value_gamma"])
        elif self._nstep == 1:
            value_gamma = self._gamma
        else:
            raise ValueError(f"cfg.nstep is {self._nstep} but the batch has no 'value_gamma' column")
        return TransitionBatch(
            self._observations(batch["obs"]),
            self._actions(torch.as_tensor(batch["action"], dtype=self.action_dtype, device=self._device)),
            self._scaled_rewards(column("reward", batch["reward"])),
            self._observations(batch["next_obs"]),
            column("terminated" if "terminated" in batch else "done", terminated_of(batch, "a learning batch")),
            value_gamma,
            column("weight", batch["weight"]) if "weight" in batch else None,
        )

    def _scaled_rewards(self, reward: torch.Tensor) -> torch.Tensor:
        """``reward`` as the losses learn from it: times ``learn.reward_scale`` (the data keeps the env's)."""
        return reward if self._reward_scale == 1.0 else reward * self._reward_scale

    # ---- checkpointing ----------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Every part named in :attr:`checkpointed`, the update counter and the random streams' state.

        Tensors are shared with the live modules, as with ``nn.Module.state_dict``;
        ``torch.save`` or ``copy.deepcopy`` the result to keep a snapshot.
        """
        state = {name: getattr(self, name).state_dict() for name in self.checkpointed}
        return {**state, "train_iter": self._train_iter, "rng": self._rng.state_dict()}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore everything :meth:`state_dict` returned."""
        for name in self.checkpointed:
            getattr(self, name).load_state_dict(state_dict[name])
        self._train_iter = int(state_dict["train_iter"])
        self._rng.load_state_dict(state_dict["rng"])

    def acting_state_dict(self) -> dict[str, Any]:
        """What ``collect_mode`` acts with: the parts in :attr:`acting` (no target, optimizer or generator)."""
        return {name: getattr(self, name).state_dict() for name in self.acting}

    def load_acting_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Take what :meth:`acting_state_dict` returned; the rest (targets, optimizers, generators) stays."""
        for name in self.acting:
            getattr(self, name).load_state_dict(state_dict[name])
