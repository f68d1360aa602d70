"""What C51 and QR-DQN share on top of the DQN family's frame: a network with ``N`` outputs
per action (:class:`~rlpipe.model.heads.DistributionalQ`), Adam's ``eps`` (``learn.adam_eps``),
noisy networks (``model.noisy``), and the helpers their learning steps call: the bootstrap
outputs (double-Q or not) and the update's noise. Each member's step reads top to bottom in its
own module (:mod:`rlpipe.policy.c51`, :mod:`rlpipe.policy.qrdqn`).

With noisy layers the noise is drawn anew for every update (online and target networks, from
the ``learn`` stream) and for every collect step (from the ``collect`` stream), as in
Fortunato et al. (2018); ``eval_mode`` acts with the layers' means, without noise.
"""
from __future__ import annotations

from abc import abstractmethod
from typing import Any

import numpy as np
import torch
from torch import nn

from rlpipe.model.heads import DistributionalQ
from rlpipe.model.noisy import has_noise, reset_noise
from rlpipe.policy.frame import ArrayLike, Observation, model_shapes
from rlpipe.policy.q_learning import QLearningPolicy
from rlpipe.policy.streams import RandomStreams


class DistributionalQPolicy(QLearningPolicy):
    """The frame of C51 and QR-DQN: :attr:`n_outputs` numbers per action from the network.

    Besides what :class:`~rlpipe.policy.q_learning.QLearningPolicy` reads, it reads
    ``learn.adam_eps`` (absent: Adam's default), ``model.dueling``, ``model.noisy``,
    ``model.noisy_sigma0`` and ``model.noisy_encoder`` (absent: off).

    A member gives :meth:`q_values` and its learning step (``_forward_learn``), which starts with
    :meth:`_draw_update_noise` and takes its target from :meth:`_bootstrap`.
    """

    def __init__(self, cfg: Any, n_outputs: int, model: nn.Module | None = None, seed: int = 0) -> None:
        self.n_outputs = n_outputs
        """Outputs per action: atoms (C51) or quantiles (QR-DQN)."""
        super().__init__(cfg, model, seed)
        adam_eps = getattr(cfg.learn, "adam_eps", None)
        if adam_eps is not None:
            for group in self.optimizer.param_groups:
                group["eps"] = float(adam_eps)
        self._noisy = has_noise(self.model)
        if self._noisy:
            reset_noise(self.model, self._rng.collect)
            reset_noise(self.target_model, self._rng.learn)

    def _make_rng(self, seed: int) -> RandomStreams:
        """Epsilon-greedy's numpy generators and the noisy layers' torch generators, ``collect`` (acting)
        and ``learn`` (updates). ``collect`` keeps torch's default seed until :meth:`seed`, as it always
        has: seeding it here would change every noisy run."""
        return RandomStreams(seed, epsilon=True, device=self._device)

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
            encoder_kwargs=getattr(model_cfg, "encoder_kwargs", None),
        )

    @abstractmethod
    def q_values(self, output: torch.Tensor) -> torch.Tensor:
        """The action values ``[N, A]`` of the outputs ``[N, A, n_outputs]``: the bootstrap action and
        acting take their argmax."""

    # ---- what a member's _forward_learn calls ---------------------------------------------
    def _draw_update_noise(self) -> None:
        """With noisy layers, new noise in the online and target networks from the ``learn`` stream."""
        if self._noisy:
            reset_noise(self.model, self._rng.learn)
            reset_noise(self.target_model, self._rng.learn)

    def _bootstrap(self, next_obs: Observation) -> torch.Tensor:
        """The target network's outputs ``[B, N]`` at the bootstrap action of ``next_obs``: the
        online network's greedy action with ``learn.double_q``, else the target's (no gradient)."""
        with torch.no_grad():
            target = self.target_model(next_obs)
            chooser = self.model(next_obs) if self._double_q else target
            next_action = self.q_values(chooser).argmax(dim=1)
            return target[torch.arange(target.shape[0], device=target.device), next_action]

    # ---- acting with noise ------------------------------------------------------------------
    def _forward_collect(self, obs: ArrayLike, eps: float = 0.0) -> np.ndarray:
        if self._noisy:
            reset_noise(self.model, self._rng.collect)
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
