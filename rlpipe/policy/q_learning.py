"""The frame of the DQN family: an online Q network, its target copy, Adam, gradient clipping,
hard or soft target updates, and epsilon-greedy acting over the actions' values.

A member of the family (DQN, C51, QR-DQN) gives:

* :meth:`QLearningPolicy.build_model`: the network, an encoder
  (:func:`~rlpipe.model.encoders.make_encoder`) and the member's head;
* ``_forward_learn``: its learning step, to be read top to bottom in its own module: the batch
  as tensors (``_learn_batch``), the target from ``self.target_model`` (and ``self.model`` for
  double Q), the loss and the priorities, then the frame's :meth:`QLearningPolicy._gradient_step`
  and :meth:`QLearningPolicy._learn_output`;

and, when its head outputs more than one number per action (quantiles, a distribution),
:meth:`QLearningPolicy.q_values`, the action values acting takes the argmax of.
"""
from __future__ import annotations

import copy
from abc import abstractmethod
from typing import Any

import numpy as np
import torch
from torch import nn

from rlpipe.policy.frame import ArrayLike, PolicyFrame, per_sample
from rlpipe.policy.optim import gradient_step, initial_learning_rate, make_adam
from rlpipe.policy.streams import RandomStreams


def discrete_cql_penalty(q: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
    """Discrete CQL's penalty (Kumar et al., 2020): ``mean_b [logsumexp_a Q(s_b, a) - Q(s_b, a_b)]`` of the
    action values ``q`` ``[B, A]`` and the data's actions ``[B]``: Q goes down on every action, most on
    the ones it rates highest, and up on the data's."""
    return (torch.logsumexp(q, dim=1) - q.gather(1, action.unsqueeze(1)).squeeze(1)).mean()


class QLearningPolicy(PolicyFrame):
    """Online network ``model``, target network ``target_model`` and ``optimizer``, from ``cfg``.

    ``cfg`` is a ``PolicyConfig`` or any object with the same attributes; this frame reads
    ``learn.learning_rate``, ``learn.target_theta`` (Polyak steps every update when set),
    ``learn.target_update_freq`` (else hard copies every that many updates), ``learn.double_q``
    (for the members' targets) and ``learn.cql_alpha`` (absent: 0, no conservative penalty),
    besides what :class:`~rlpipe.policy.frame.PolicyFrame` reads.
    ``model`` replaces the network :meth:`build_model` would build from ``cfg.model``: it
    receives observations on the policy's device in the dtype they came in (start it with
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
        self._double_q = bool(learn.double_q)
        self._cql_alpha = float(getattr(learn, "cql_alpha", 0.0))
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

    def _make_rng(self, seed: int) -> RandomStreams:
        """The numpy generators of epsilon-greedy acting, ``exploration`` and ``evaluation``."""
        return RandomStreams(seed, epsilon=True)

    def learning_rate_groups(self) -> dict[str, list[dict[str, Any]]]:
        return {"learning_rate": self.optimizer.param_groups}

    # ---- what a member defines --------------------------------------------------------
    @abstractmethod
    def build_model(self, model_cfg: Any) -> nn.Module:
        """The online network from ``cfg.model`` (drawn from torch's generator)."""

    def _actions(self, action: torch.Tensor) -> torch.Tensor:
        """Discrete actions ``[B]``; the seed's ``[B, 1]`` action columns are read as ``[B]``."""
        return per_sample("action", action, "one discrete action per row")

    def q_values(self, output: torch.Tensor) -> torch.Tensor:
        """The action values ``[N, A]`` in the network's ``output``; acting takes their argmax."""
        return output

    # ---- learning: what a member's _forward_learn calls -------------------------------------
    def _conservative(self, loss: torch.Tensor, output: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """``loss`` plus, with ``learn.cql_alpha``, that weight times :func:`discrete_cql_penalty` of the
        action values in the network's ``output`` at ``s`` (differentiable) and the batch's actions."""
        if self._cql_alpha == 0.0:
            return loss
        return loss + self._cql_alpha * discrete_cql_penalty(self.q_values(output), action)

    def _gradient_step(self, loss: torch.Tensor) -> None:
        """Backpropagate ``loss`` and step Adam (clipping with ``learn.grad_clip``), count the update,
        then update the target network."""
        gradient_step(self.optimizer, self._params, loss, self._grad_clip)
        self._train_iter += 1
        self._update_target()

    def _learn_output(self, loss: torch.Tensor, q: torch.Tensor, priority: torch.Tensor) -> dict[str, Any]:
        """The step's metrics (above) from its ``loss``, the online values ``q`` ``[B, A]`` and the
        per-sample ``priority`` ``[B]``."""
        return {
            "total_loss": loss.item(),
            "q_value": q.detach().mean().item(),
            "priority": priority.cpu().numpy(),
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
        return self._epsilon_greedy(self._q(obs), eps, self._rng.exploration)

    @torch.inference_mode()
    def _forward_eval(self, obs: ArrayLike, eps: float = 0.0) -> np.ndarray:
        """Greedy actions, int64 ``[N]``; with ``eps`` (``policy.eval.eps``) epsilon-greedy from the
        evaluation generator, so evaluating draws nothing from exploration's stream."""
        return self._epsilon_greedy(self._q(obs), eps, self._rng.evaluation)
