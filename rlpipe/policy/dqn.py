"""Deep Q-learning (Mnih et al., 2015) with double-Q targets (van Hasselt et al., 2016).

``dqn_td_loss`` is the update rule as a pure function of tensors; ``DQNPolicy`` wires the
online network, its target copy, the optimizer and the target updates around it.

Metrics returned by ``learn_mode.forward``:
    total_loss  Huber TD loss of the step (importance-weighted when ``weight`` is given).
    q_value     mean online Q over the batch and all actions.
    priority    ``|td_error|`` per sample, np.float32 [B], for prioritised replay.
    cur_lr      learning rate of the step.
"""
from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch import nn

from rlpipe.model import DQN
from rlpipe.policy.base import PolicyMode
from rlpipe.policy.optim import adam_betas_of, make_adam

ArrayLike = np.ndarray | torch.Tensor


def dqn_td_loss(
    q: torch.Tensor,
    q_next_online: torch.Tensor | None,
    q_next_target: torch.Tensor,
    action: torch.Tensor,
    reward: torch.Tensor,
    terminated: torch.Tensor,
    value_gamma: torch.Tensor | float,
    weight: torch.Tensor | None = None,
    double_q: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Huber TD loss of one batch and the per-sample TD errors.

    ``B`` is the batch size and ``A`` the number of actions.

    Args:
        q: ``[B, A]`` online ``Q(s, .)``; the loss is differentiable through it.
        q_next_online: ``[B, A]`` online ``Q(s', .)``, used to pick the bootstrap action
            when ``double_q``; may be None otherwise.
        q_next_target: ``[B, A]`` target-network ``Q(s', .)``.
        action: int64 ``[B]`` actions taken in ``s``.
        reward: float ``[B]`` reward (for n-step: the discounted sum of the n rewards).
        terminated: float ``[B]``, 1.0 where ``s'`` is terminal (no bootstrap); a truncated
            transition has 0.0 here and is bootstrapped.
        value_gamma: float ``[B]`` or a scalar: discount applied to the bootstrap value
            (``gamma ** k`` for a k-step return).
        weight: float ``[B]`` importance-sampling weights, or None for uniform weights.
        double_q: pick ``a' = argmax q_next_online`` and evaluate it with the target
            network; otherwise bootstrap from ``max q_next_target``.

    Returns:
        ``loss`` (scalar) and ``td_error = td_target - Q(s, a)`` (``[B]``, no gradient).
    """
    q_sa = q.gather(1, action.unsqueeze(1)).squeeze(1)
    if double_q:
        if q_next_online is None:
            raise ValueError("double_q needs q_next_online (online Q of the next observations)")
        next_action = q_next_online.argmax(dim=1, keepdim=True)
        q_next = q_next_target.gather(1, next_action).squeeze(1)
    else:
        q_next = q_next_target.max(dim=1).values
    td_target = (reward + value_gamma * (1.0 - terminated) * q_next).detach()
    if weight is None:
        loss = nn.functional.smooth_l1_loss(q_sa, td_target)
    else:
        loss = (nn.functional.smooth_l1_loss(q_sa, td_target, reduction="none") * weight).mean()
    return loss, td_target - q_sa.detach()


def _build_model(model_cfg: Any) -> nn.Module:
    if model_cfg.obs_shape is None or model_cfg.action_shape is None:
        raise ValueError(
            "cfg.model.obs_shape and cfg.model.action_shape must be set (from the env) to build the model"
        )
    return DQN(
        model_cfg.obs_shape,
        model_cfg.action_shape,
        encoder_hidden_size_list=model_cfg.encoder_hidden_size_list,
        dueling=model_cfg.dueling,
    )


class DQNPolicy:
    """DQN: online network, target network, Adam, gradient clipping, hard or soft target updates.

    ``cfg`` is a ``PolicyConfig`` or any object with the same attributes. ``model`` defaults to
    ``DQN`` built from ``cfg.model``. ``seed`` seeds the exploration generator (see :meth:`seed`).
    """

    def __init__(self, cfg: Any, model: nn.Module | None = None, seed: int = 0) -> None:
        learn = cfg.learn
        self._gamma = float(cfg.discount_factor)
        self._nstep = int(cfg.nstep)
        self._double_q = bool(learn.double_q)
        self._grad_clip = None if learn.grad_clip is None else float(learn.grad_clip)
        self._target_theta = None if learn.target_theta is None else float(learn.target_theta)
        self._target_update_freq = None if learn.target_update_freq is None else int(learn.target_update_freq)
        self._device = torch.device("cuda" if cfg.cuda and torch.cuda.is_available() else "cpu")

        self.model = (model if model is not None else _build_model(cfg.model)).to(self._device)
        self.target_model = copy.deepcopy(self.model).requires_grad_(False)
        self.optimizer = make_adam(self.model.parameters(), float(learn.learning_rate), adam_betas_of(learn))
        self._params = list(self.model.parameters())
        self._target_pairs = list(
            zip(
                [*self.target_model.parameters(), *self.target_model.buffers()],
                [*self.model.parameters(), *self.model.buffers()],
                strict=True,
            )
        )
        self._train_iter = 0
        self._rng = np.random.default_rng(seed)

        self.learn_mode = PolicyMode(self._forward_learn)
        self.collect_mode = PolicyMode(self._forward_collect)
        self.eval_mode = PolicyMode(self._forward_eval)

    @property
    def train_iter(self) -> int:
        """Gradient steps taken so far (drives the hard target update)."""
        return self._train_iter

    def seed(self, seed: int) -> None:
        """Reseed the exploration generator of ``collect_mode``."""
        self._rng = np.random.default_rng(seed)

    # ---- learning ----------------------------------------------------------------
    def _tensor(self, x: ArrayLike, dtype: torch.dtype) -> torch.Tensor:
        return torch.as_tensor(x, dtype=dtype, device=self._device)

    def _forward_learn(self, batch: Mapping[str, ArrayLike]) -> dict[str, Any]:
        """One gradient step on a columnar batch (see the Batch section of the contract)."""
        obs = self._tensor(batch["obs"], torch.float32)
        next_obs = self._tensor(batch["next_obs"], torch.float32)
        action = self._tensor(batch["action"], torch.int64)
        reward = self._tensor(batch["reward"], torch.float32)
        terminated = self._tensor(batch["terminated"], torch.float32)
        if "value_gamma" in batch:
            value_gamma: torch.Tensor | float = self._tensor(batch["value_gamma"], torch.float32)
        elif self._nstep == 1:
            value_gamma = self._gamma
        else:
            raise ValueError(f"cfg.nstep is {self._nstep} but the batch has no 'value_gamma' column")
        weight = self._tensor(batch["weight"], torch.float32) if "weight" in batch else None

        with torch.no_grad():
            q_next_target = self.target_model(next_obs)
            q_next_online = self.model(next_obs) if self._double_q else None
        q = self.model(obs)
        loss, td_error = dqn_td_loss(
            q, q_next_online, q_next_target, action, reward, terminated, value_gamma, weight, self._double_q
        )

        self.optimizer.zero_grad()
        loss.backward()
        if self._grad_clip is not None:
            nn.utils.clip_grad_norm_(self._params, self._grad_clip)
        self.optimizer.step()
        self._train_iter += 1
        self._update_target()

        return {
            "total_loss": loss.item(),
            "q_value": q.detach().mean().item(),
            "priority": td_error.abs().cpu().numpy(),
            "cur_lr": self.optimizer.param_groups[0]["lr"],
        }

    def _update_target(self) -> None:
        """Polyak-average with ``target_theta`` every step, else copy every ``target_update_freq`` steps."""
        if self._target_theta is not None:
            with torch.no_grad():
                for target, online in self._target_pairs:
                    if target.is_floating_point():
                        target.lerp_(online, self._target_theta)
                    else:
                        target.copy_(online)
        elif self._target_update_freq is not None and self._train_iter % self._target_update_freq == 0:
            with torch.no_grad():
                for target, online in self._target_pairs:
                    target.copy_(online)

    # ---- acting ------------------------------------------------------------------
    def _q(self, obs: ArrayLike) -> torch.Tensor:
        return self.model(self._tensor(obs, torch.float32))

    @torch.inference_mode()
    def _forward_collect(self, obs: ArrayLike, eps: float = 0.0) -> np.ndarray:
        """Epsilon-greedy actions, int64 ``[N]``: uniform over all actions with probability ``eps``."""
        q = self._q(obs)
        action = q.argmax(dim=1).cpu().numpy()
        if eps > 0.0:
            n, n_actions = q.shape
            explore = self._rng.random(n) < eps
            action = np.where(explore, self._rng.integers(n_actions, size=n), action)
        return action

    @torch.inference_mode()
    def _forward_eval(self, obs: ArrayLike) -> np.ndarray:
        """Greedy actions, int64 ``[N]``."""
        return self._q(obs).argmax(dim=1).cpu().numpy()

    # ---- checkpointing -----------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Networks, optimizer, update counter and exploration RNG state.

        Tensors are shared with the live modules, as with ``nn.Module.state_dict``;
        ``torch.save`` or ``copy.deepcopy`` the result to keep a snapshot.
        """
        return {
            "model": self.model.state_dict(),
            "target_model": self.target_model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "train_iter": self._train_iter,
            "rng": self._rng.bit_generator.state,
        }

    def acting_state_dict(self) -> dict[str, Any]:
        """What ``collect_mode`` acts with: the online network (what a remote collector needs of the learner)."""
        return {"model": self.model.state_dict()}

    def load_acting_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Take the online network :meth:`acting_state_dict` returned; target, optimizer and generator stay."""
        self.model.load_state_dict(state_dict["model"])

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore everything :meth:`state_dict` returned."""
        self.model.load_state_dict(state_dict["model"])
        self.target_model.load_state_dict(state_dict["target_model"])
        self.optimizer.load_state_dict(state_dict["optimizer"])
        self._train_iter = int(state_dict["train_iter"])
        self._rng.bit_generator.state = state_dict["rng"]
