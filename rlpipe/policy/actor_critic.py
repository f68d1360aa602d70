"""What the actor-critic policies (SAC, TD3, DDPG, CrossQ) share: batches as tensors, one optimizer
step, Polyak averaging, critics frozen for the actor step, the policy's own generators, and
:class:`ActorCriticPolicy`, the frame around each update rule."""
from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple, get_args

import numpy as np
import torch
from torch import nn

from rlpipe.config.schema import Precision
from rlpipe.policy.base import PolicyMode
from rlpipe.policy.optim import adam_betas_of
from rlpipe.utils.running_stats import RunningMeanStd

logger = logging.getLogger(__name__)
ArrayLike = np.ndarray | torch.Tensor
PRECISIONS: tuple[str, ...] = get_args(Precision)
"""Values of ``learn.precision``."""
OBS_NORM_CLIP = 5.0
"""With ``model.obs_norm`` the networks see ``clip((obs - mean) / std, -5, 5)`` (the HER paper's clip)."""


class ContinuousBatch(NamedTuple):
    """A learning batch as tensors on the policy's device (``B`` rows)."""

    obs: torch.Tensor  # [B, obs_dim]
    action: torch.Tensor  # [B, action_dim], in [-1, 1]
    reward: torch.Tensor  # [B]
    next_obs: torch.Tensor  # [B, obs_dim]
    terminated: torch.Tensor  # [B], float 1.0 where there is no bootstrap
    value_gamma: torch.Tensor | float  # [B] or the scalar gamma
    weight: torch.Tensor | None  # [B] importance weights


def continuous_batch(
    batch: Mapping[str, ArrayLike], device: torch.device, gamma: float, nstep: int
) -> ContinuousBatch:
    """Convert a columnar batch; ``value_gamma`` falls back to ``gamma`` only for 1-step returns."""

    def tensor(key: str) -> torch.Tensor:
        return torch.as_tensor(batch[key], dtype=torch.float32, device=device)

    if "value_gamma" in batch:
        value_gamma: torch.Tensor | float = tensor("value_gamma")
    elif nstep == 1:
        value_gamma = gamma
    else:
        raise ValueError(f"cfg.nstep is {nstep} but the batch has no 'value_gamma' column")
    return ContinuousBatch(
        tensor("obs"), tensor("action"), tensor("reward"), tensor("next_obs"), tensor("terminated"),
        value_gamma, tensor("weight") if "weight" in batch else None,
    )


def check_model_cfg(model_cfg: Any) -> tuple[int, int, list[int]]:
    """``(obs_shape, action_shape, hidden sizes)`` from ``cfg.model``, which must know the env's sizes."""
    if model_cfg.obs_shape is None or model_cfg.action_shape is None:
        raise ValueError(
            "cfg.model.obs_shape and cfg.model.action_shape must be set (from the env) to build the model"
        )
    return int(model_cfg.obs_shape), int(model_cfg.action_shape), list(model_cfg.encoder_hidden_size_list)


def target_theta_of(learn_cfg: Any) -> float:
    if learn_cfg.target_theta is None:
        raise ValueError("cfg.learn.target_theta must be set: actor-critic targets are Polyak-averaged every step")
    return float(learn_cfg.target_theta)


def gradient_step(
    optimizer: torch.optim.Optimizer, params: Sequence[torch.Tensor], loss: torch.Tensor, grad_clip: float | None
) -> None:
    """Backpropagate ``loss`` into ``params`` (clipping their joint norm) and take an optimizer step."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if grad_clip is not None:
        nn.utils.clip_grad_norm_(params, grad_clip, foreach=True)
    optimizer.step()


def soft_update_(target: Sequence[torch.Tensor], online: Sequence[torch.Tensor], theta: float) -> None:
    """``target <- (1 - theta) * target + theta * online``, in place, for every pair."""
    with torch.no_grad():
        torch._foreach_lerp_(list(target), list(online), theta)


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


class Generators:
    """The policy's two random streams: exploration (``collect``) and the update's noise (``learn``).

    Both derive from one seed; :meth:`seed` reseeds exploration only, as DQN's ``seed`` does.
    """

    def __init__(self, seed: int, device: torch.device) -> None:
        self.collect = torch.Generator(device=device)
        self.learn = torch.Generator(device=device)
        self.learn.manual_seed(int(np.random.SeedSequence(seed).generate_state(1, dtype=np.uint64)[0]))
        self.seed(seed)

    def seed(self, seed: int) -> None:
        self.collect.manual_seed(seed)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"collect": self.collect.get_state(), "learn": self.learn.get_state()}

    def load_state_dict(self, state: Mapping[str, torch.Tensor]) -> None:
        self.collect.set_state(state["collect"])
        self.learn.set_state(state["learn"])


class ActorCriticPolicy(ABC):
    """The frame of SAC, TD3, DDPG and CrossQ around their update rule.

    It reads the settings every actor-critic shares (``discount_factor``, ``nstep``, ``cuda``,
    ``learn.grad_clip``, ``learn.precision``, ``learn.adam_betas``, ``model.obs_norm``), owns the
    device, the update counter, the generators and the observation statistics, and wires the three
    modes (``learn_mode`` under bfloat16 autocast with ``precision: bf16-mixed``).

    Observation normalisation (``model.obs_norm``; absent means off). Every network sees
    observations normalised by running statistics of the observations of the learning
    batches, updated before each update; with HER they include the relabelled goals, the
    goals the critics learn about (as in the HER paper). Goal-reaching robots need it: their
    positions differ by centimetres around a metre (SB3's zoo normalises for them too).

    A subclass builds its networks and optimizers, names each checkpointed one in
    :attr:`checkpointed`, and defines the three ``_forward_*``.
    """

    acting: tuple[str, ...] = ("actor",)
    """Attributes (modules) ``collect_mode`` acts with: what a remote collector takes from the learner."""
    checkpointed: tuple[str, ...] = ()
    """Attributes with ``state_dict``/``load_state_dict`` (modules, optimizers) a checkpoint holds."""

    def __init__(self, cfg: Any, seed: int) -> None:
        self._gamma = float(cfg.discount_factor)
        self._nstep = int(cfg.nstep)
        self._grad_clip = None if cfg.learn.grad_clip is None else float(cfg.learn.grad_clip)
        self._adam_betas = adam_betas_of(cfg.learn)
        self._device = torch.device("cuda" if cfg.cuda and torch.cuda.is_available() else "cpu")
        self._train_iter = 0
        self._rng = Generators(seed, self._device)
        obs_norm = bool(getattr(cfg.model, "obs_norm", False))
        self._obs_stats = RunningMeanStd((check_model_cfg(cfg.model)[0],)) if obs_norm else None
        self.learn_mode = PolicyMode(self._learn_under_autocast if self._bf16_mixed(cfg.learn) else self._forward_learn)
        self.collect_mode = PolicyMode(self._forward_collect)
        self.eval_mode = PolicyMode(self._forward_eval)

    @property
    def train_iter(self) -> int:
        """Gradient updates of the critics taken so far."""
        return self._train_iter

    def seed(self, seed: int) -> None:
        """Reseed the exploration generator of ``collect_mode``."""
        self._rng.seed(seed)

    def _obs(self, obs: ArrayLike) -> torch.Tensor:
        """Observations as the networks see them: a float32 tensor, normalised with ``obs_norm``."""
        return self._normalized(torch.as_tensor(obs, dtype=torch.float32, device=self._device))

    def _normalized(self, obs: torch.Tensor) -> torch.Tensor:
        return obs if self._obs_stats is None else self._obs_stats.normalize(obs, OBS_NORM_CLIP)

    def _learn_batch(self, batch: Mapping[str, ArrayLike]) -> ContinuousBatch:
        """The learning batch as tensors; with ``obs_norm`` its observations update the statistics
        first, then both ``obs`` and ``next_obs`` are normalised."""
        b = continuous_batch(batch, self._device, self._gamma, self._nstep)
        if self._obs_stats is None:
            return b
        self._obs_stats.update(b.obs)
        return b._replace(obs=self._normalized(b.obs), next_obs=self._normalized(b.next_obs))

    def _bf16_mixed(self, learn_cfg: Any) -> bool:
        """Whether ``learn.precision`` (absent means fp32) asks for bfloat16 products in the updates."""
        precision = getattr(learn_cfg, "precision", "fp32")
        if precision not in PRECISIONS:
            raise ValueError(f"cfg.learn.precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        if precision == "fp32":
            return False
        # torch's own test for the oneDNN bfloat16 kernels (AVX512-BF16 or AMX); it has no public one.
        if self._device.type == "cpu" and not torch.ops.mkldnn._is_mkldnn_bf16_supported():
            logger.warning("learn.precision=bf16-mixed: this CPU has no bfloat16 instructions, updates will be slower")
        return True

    def _learn_under_autocast(self, batch: Mapping[str, ArrayLike]) -> dict[str, Any]:
        """:meth:`_forward_learn` with the matrix products in bfloat16 (``torch.autocast``): the
        parameters, their gradients, Adam's state and the losses' reductions stay float32."""
        with torch.autocast(self._device.type, dtype=torch.bfloat16):
            return self._forward_learn(batch)

    @abstractmethod
    def _forward_learn(self, batch: Mapping[str, ArrayLike]) -> dict[str, Any]: ...

    @abstractmethod
    def _forward_collect(self, obs: ArrayLike, **ignored: Any) -> np.ndarray: ...

    @abstractmethod
    def _forward_eval(self, obs: ArrayLike) -> np.ndarray: ...

    def state_dict(self) -> dict[str, Any]:
        """Every part named in :attr:`checkpointed`, the update counter, both generators' states
        and, with ``obs_norm``, the observation statistics.

        Tensors are shared with the live modules, as with ``nn.Module.state_dict``;
        ``torch.save`` or ``copy.deepcopy`` the result to keep a snapshot.
        """
        state = {name: getattr(self, name).state_dict() for name in self.checkpointed}
        if self._obs_stats is not None:
            state["obs_stats"] = self._obs_stats.state_dict()
        return {**state, "train_iter": self._train_iter, "rng": self._rng.state_dict()}

    def acting_state_dict(self) -> dict[str, Any]:
        """What ``collect_mode`` acts with: the parts in :attr:`acting` and, with ``obs_norm``, the
        observation statistics (what a remote collector needs; no critic, optimizer or generator)."""
        state = {name: getattr(self, name).state_dict() for name in self.acting}
        if self._obs_stats is not None:
            state["obs_stats"] = self._obs_stats.state_dict()
        return state

    def load_acting_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Take what :meth:`acting_state_dict` returned; the rest (critics, generators, ...) stays."""
        for name in self.acting:
            getattr(self, name).load_state_dict(state_dict[name])
        if self._obs_stats is not None:
            self._obs_stats.load_state_dict(state_dict["obs_stats"])

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore everything :meth:`state_dict` returned."""
        for name in self.checkpointed:
            getattr(self, name).load_state_dict(state_dict[name])
        if self._obs_stats is not None:
            if "obs_stats" not in state_dict:
                raise ValueError("the policy normalises observations (model.obs_norm) but the state has no obs_stats")
            self._obs_stats.load_state_dict(state_dict["obs_stats"])
        self._train_iter = int(state_dict["train_iter"])
        self._rng.load_state_dict(state_dict["rng"])
