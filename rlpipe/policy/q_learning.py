"""The frame of the DQN family: an online Q network, its target copy, Adam, gradient clipping,
hard or soft target updates, and epsilon-greedy acting over the actions' values.

A member of the family (DQN; later QR-DQN, C51, ...) replaces two things:

* :meth:`QLearningPolicy.build_model`: the network, an encoder
  (:func:`~rlpipe.model.encoders.make_encoder`) and the member's head;
* :meth:`QLearningPolicy.loss`: the loss of a batch (its target computed from
  ``self.target_model`` and ``self.model``), the per-sample priority and the batch's Q-values;

and, when its head outputs more than one number per action (quantiles, a distribution),
:meth:`QLearningPolicy.q_values`, the action values acting takes the argmax of.
"""
from __future__ import annotations

import copy
from abc import abstractmethod
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import nn

from rlpipe.policy.frame import ArrayLike, PolicyFrame, TransitionBatch, per_sample
from rlpipe.policy.optim import gradient_step, initial_learning_rate, make_adam


class QLoss(NamedTuple):
    """What :meth:`QLearningPolicy.loss` returns for a batch of ``B`` transitions and ``A`` actions."""

    loss: torch.Tensor  # scalar, differentiable in the online network
    priority: torch.Tensor  # [B], for prioritised replay (DQN: |td_error|)
    q: torch.Tensor  # [B, A] online Q(s, .), for the q_value metric


EVALUATION_STREAM = 1
"""The spawn key of the evaluation generator's seed: a stream apart from exploration's."""


def _generators(seed: int) -> tuple[np.random.Generator, np.random.Generator]:
    """Exploration's generator and evaluation's, from ``seed``."""
    evaluation = np.random.SeedSequence(seed, spawn_key=(EVALUATION_STREAM,))
    return np.random.default_rng(seed), np.random.default_rng(evaluation)


class ExplorationRng:
    """The numpy generators of epsilon-greedy acting: ``generator`` (exploration) and
    ``evaluation`` (``eval_mode``'s epsilon). The state is exploration's bit generator's: the
    evaluation stream starts again from the seed in a resumed run, as the evaluator's envs do."""

    def __init__(self, seed: int) -> None:
        self.generator, self.evaluation = _generators(seed)

    def seed(self, seed: int) -> None:
        self.generator, self.evaluation = _generators(seed)

    def state_dict(self) -> dict[str, Any]:
        return dict(self.generator.bit_generator.state)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.generator.bit_generator.state = state


class QLearningPolicy(PolicyFrame[ExplorationRng]):
    """Online network ``model``, target network ``target_model`` and ``optimizer``, from ``cfg``.

    ``cfg`` is a ``PolicyConfig`` or any object with the same attributes; this frame reads
    ``learn.learning_rate``, ``learn.target_theta`` (Polyak steps every update when set) and
    ``learn.target_update_freq`` (else hard copies every that many updates), besides what
    :class:`~rlpipe.policy.frame.PolicyFrame` reads. ``model`` replaces the network
    :meth:`build_model` would build from ``cfg.model``: it receives observations on the
    policy's device in the dtype they came in (start it with
    :func:`~rlpipe.model.encoders.make_encoder` to have them converted). ``seed`` seeds exploration.

    Metrics returned by ``learn_mode.forward``:
        total_loss  the loss of the step.
        q_value     mean online Q over the batch and all actions.
        priority    per sample, np.float32 [B], for prioritised replay.
        cur_lr      learning rate of the step.
    """

    acting: tuple[str, ...] = ("model",)
    checkpointed: tuple[str, ...] = ("model", "target_model", "optimizer")
    action_dtype = torch.int64

    def __init__(self, cfg: Any, model: nn.Module | None = None, seed: int = 0) -> None:
        super().__init__(cfg, seed)
        learn = cfg.learn
        self._target_theta = None if learn.target_theta is None else float(learn.target_theta)
        self._target_update_freq = None if learn.target_update_freq is None else int(learn.target_update_freq)

        self.model = (model if model is not None else self.build_model(cfg.model)).to(self._device)
        self.target_model = copy.deepcopy(self.model).requires_grad_(False)
        self.optimizer = make_adam(self.model.parameters(), initial_learning_rate(learn, "learning_rate"),
                                   self._adam_betas)
        self._params = list(self.model.parameters())
        self._target_pairs = list(
            zip(
                [*self.target_model.parameters(), *self.target_model.buffers()],
                [*self.model.parameters(), *self.model.buffers()],
                strict=True,
            )
        )

    def _make_rng(self, seed: int) -> ExplorationRng:
        return ExplorationRng(seed)

    def learning_rate_groups(self) -> dict[str, list[dict[str, Any]]]:
        return {"learning_rate": self.optimizer.param_groups}

    # ---- what a member defines --------------------------------------------------------
    @abstractmethod
    def build_model(self, model_cfg: Any) -> nn.Module:
        """The online network from ``cfg.model`` (drawn from torch's generator)."""

    @abstractmethod
    def loss(self, b: TransitionBatch) -> QLoss:
        """The loss of one batch, its per-sample priority and the online Q-values."""

    def _actions(self, action: torch.Tensor) -> torch.Tensor:
        """Discrete actions ``[B]``; the seed's ``[B, 1]`` action columns are read as ``[B]``."""
        return per_sample("action", action, "one discrete action per row")

    def q_values(self, output: torch.Tensor) -> torch.Tensor:
        """The action values ``[N, A]`` in the network's ``output``; acting takes their argmax."""
        return output

    # ---- learning ----------------------------------------------------------------------
    def _forward_learn(self, batch: Mapping[str, ArrayLike]) -> dict[str, Any]:
        """One gradient step on a columnar batch, then the target update."""
        out = self.loss(self._learn_batch(batch))
        gradient_step(self.optimizer, self._params, out.loss, self._grad_clip)
        self._train_iter += 1
        self._update_target()
        return {
            "total_loss": out.loss.item(),
            "q_value": out.q.detach().mean().item(),
            "priority": out.priority.cpu().numpy(),
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

    # ---- acting ------------------------------------------------------------------------
    def _q(self, obs: ArrayLike) -> torch.Tensor:
        return self.q_values(self.model(self._observations(obs)))

    @staticmethod
    def _epsilon_greedy(q: torch.Tensor, eps: float, rng: np.random.Generator) -> np.ndarray:
        """Actions int64 ``[N]`` for values ``q`` ``[N, A]``: greedy, or uniform over all actions
        with probability ``eps`` (drawn from ``rng`` only when ``eps > 0``)."""
        action = q.argmax(dim=1).cpu().numpy()
        if eps > 0.0:
            n, n_actions = q.shape
            explore = rng.random(n) < eps
            action = np.where(explore, rng.integers(n_actions, size=n), action)
        return action

    @torch.inference_mode()
    def _forward_collect(self, obs: ArrayLike, eps: float = 0.0) -> np.ndarray:
        """Epsilon-greedy actions, int64 ``[N]``, from the exploration generator."""
        return self._epsilon_greedy(self._q(obs), eps, self._rng.generator)

    @torch.inference_mode()
    def _forward_eval(self, obs: ArrayLike, eps: float = 0.0) -> np.ndarray:
        """Greedy actions, int64 ``[N]``; with ``eps`` (``policy.eval.eps``) epsilon-greedy from the
        evaluation generator, so evaluating draws nothing from exploration's stream."""
        return self._epsilon_greedy(self._q(obs), eps, self._rng.evaluation)
