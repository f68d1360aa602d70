"""What C51 and QR-DQN share on top of the DQN family's frame: a network with ``N`` outputs
per action (:class:`~rlpipe.model.heads.DistributionalQ`), the bootstrap action (double-Q or
not), the loss's wiring (a member gives the target and the loss to it), Adam's ``eps``
(``learn.adam_eps``), and noisy networks (``model.noisy``).

With noisy layers the noise is drawn anew for every update (online and target networks, from
the ``learn`` stream) and for every collect step (from the ``collect`` stream), as in
Fortunato et al. (2018); ``eval_mode`` acts with the layers' means, without noise.
"""
from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch import nn

from rlpipe.model.heads import DistributionalQ
from rlpipe.model.noisy import has_noise, reset_noise
from rlpipe.policy.frame import ArrayLike, Observation, TransitionBatch, model_shapes
from rlpipe.policy.q_learning import ExplorationRng, QLearningPolicy, QLoss


class NoisyStreams(ExplorationRng):
    """Epsilon-greedy's numpy generator and two torch generators for noisy layers: ``collect``
    (acting; reseeded by :meth:`seed` with exploration) and ``learn`` (updates; never reseeded)."""

    def __init__(self, seed: int, device: torch.device) -> None:
        self.collect = torch.Generator(device=device)
        self.learn = torch.Generator(device=device)
        self.learn.manual_seed(int(np.random.SeedSequence(seed).generate_state(1, dtype=np.uint64)[0]))
        super().__init__(seed)

    def seed(self, seed: int) -> None:
        super().seed(seed)
        self.collect.manual_seed(seed)

    def state_dict(self) -> dict[str, Any]:
        return {"eps": super().state_dict(), "collect": self.collect.get_state(), "learn": self.learn.get_state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state["eps"])
        self.collect.set_state(state["collect"])
        self.learn.set_state(state["learn"])


class DistributionalQPolicy(QLearningPolicy):
    """The frame of C51 and QR-DQN: :attr:`n_outputs` numbers per action from the network.

    Besides what :class:`~rlpipe.policy.q_learning.QLearningPolicy` reads, it reads
    ``learn.double_q``, ``learn.adam_eps`` (absent: Adam's default), ``model.dueling``,
    ``model.noisy``, ``model.noisy_sigma0`` and ``model.noisy_encoder`` (absent: off).

    A member gives :meth:`~rlpipe.policy.q_learning.QLearningPolicy.q_values`, the target of the
    taken actions' outputs (:meth:`target`) and the loss to it (:meth:`distribution_loss`); the
    frame's :meth:`loss` wires them to the online network.
    """

    def __init__(self, cfg: Any, n_outputs: int, model: nn.Module | None = None, seed: int = 0) -> None:
        self.n_outputs = n_outputs
        """Outputs per action: atoms (C51) or quantiles (QR-DQN)."""
        self._double_q = bool(cfg.learn.double_q)
        super().__init__(cfg, model, seed)
        adam_eps = getattr(cfg.learn, "adam_eps", None)
        if adam_eps is not None:
            for group in self.optimizer.param_groups:
                group["eps"] = float(adam_eps)
        self._noisy = has_noise(self.model)
        if self._noisy:
            reset_noise(self.model, self._streams.collect)
            reset_noise(self.target_model, self._streams.learn)

    def _make_rng(self, seed: int) -> NoisyStreams:
        self._streams = NoisyStreams(seed, self._device)
        return self._streams

    def build_model(self, model_cfg: Any) -> nn.Module:
        obs_shape, action_shape = model_shapes(model_cfg)
        return DistributionalQ(
            obs_shape,
            action_shape,
            self.n_outputs,
            encoder_hidden_size_list=model_cfg.encoder_hidden_size_list,
            dueling=model_cfg.dueling,
            encoder=getattr(model_cfg, "encoder", "auto"),
            noisy=bool(getattr(model_cfg, "noisy", False)),
            sigma0=float(getattr(model_cfg, "noisy_sigma0", 0.5)),
            noisy_encoder=bool(getattr(model_cfg, "noisy_encoder", False)),
        )

    # ---- what a member defines --------------------------------------------------------
    @abstractmethod
    def target(self, b: TransitionBatch) -> torch.Tensor:
        """The target ``[B, M]`` of the taken actions' outputs (no gradient), from :meth:`_bootstrap`."""

    @abstractmethod
    def distribution_loss(
        self, outputs: torch.Tensor, action: torch.Tensor, target: torch.Tensor, weight: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The loss (scalar) of the online ``outputs`` ``[B, A, N]`` at ``action`` ``[B]`` to ``target``,
        weighted by ``weight`` ``[B]`` (None: uniformly), and the loss per sample ``[B]`` (no gradient)."""

    # ---- learning ------------------------------------------------------------------------
    def loss(self, b: TransitionBatch) -> QLoss:
        """:meth:`distribution_loss` to :meth:`target`; the priority is the per-sample loss."""
        target = self.target(b)
        outputs = self.model(b.obs)
        loss, per_sample = self.distribution_loss(outputs, b.action, target, b.weight)
        return QLoss(loss, per_sample, self.q_values(outputs.detach()))

    def _bootstrap(self, next_obs: Observation) -> torch.Tensor:
        """The target network's outputs ``[B, N]`` at the bootstrap action of ``next_obs``: the
        online network's greedy action with ``learn.double_q``, else the target's."""
        with torch.no_grad():
            target = self.target_model(next_obs)
            chooser = self.model(next_obs) if self._double_q else target
            next_action = self.q_values(chooser).argmax(dim=1)
            return target[torch.arange(target.shape[0], device=target.device), next_action]

    # ---- noise ----------------------------------------------------------------------------
    def _forward_learn(self, batch: Mapping[str, ArrayLike]) -> dict[str, Any]:
        if self._noisy:
            reset_noise(self.model, self._streams.learn)
            reset_noise(self.target_model, self._streams.learn)
        return super()._forward_learn(batch)

    def _forward_collect(self, obs: ArrayLike, eps: float = 0.0) -> np.ndarray:
        if self._noisy:
            reset_noise(self.model, self._streams.collect)
        return super()._forward_collect(obs, eps)

    def _forward_eval(self, obs: ArrayLike, eps: float = 0.0) -> np.ndarray:
        """Greedy (epsilon-greedy with ``eps``) actions; noisy layers act with their means, and
        ``eps`` applies on top of them, as Dopamine's Rainbow does at evaluation."""
        if not self._noisy:
            return super()._forward_eval(obs, eps)
        self.model.eval()
        try:
            return super()._forward_eval(obs, eps)
        finally:
            self.model.train()
