"""Conservative Q-learning for continuous actions (Kumar et al., 2020, "Conservative Q-Learning for
Offline Reinforcement Learning"), on SAC: CQL(H) with importance-sampled actions.

SAC's update (:mod:`rlpipe.policy.sac`) with one term added to each critic's loss, which pushes
Q down on actions the policy and a uniform proposal would pick and up on the data's::

    penalty_i = cql_alpha * mean_b [ logsumexp_k (Q_i(s_b, a_k) - log p(a_k)) - Q_i(s_b, a_b) ]

over ``3 * cql_n_actions`` actions per state: uniform in ``[-1, 1]`` (``log p = -A log 2``),
and samples of the policy at ``s`` and at ``s'`` (``log p`` their log-probabilities, no gradient
to the actor), all evaluated at ``s``. ``cql_alpha`` is fixed (the paper's CQL(H) without the
Lagrange variant).

Metrics: SAC's, with ``cql_penalty`` (summed over the critics) inside ``critic_loss``.
"""
from __future__ import annotations

import math
from typing import Any

import torch

from rlpipe.policy.frame import Observation, TransitionBatch
from rlpipe.policy.sac import SACPolicy


def cql_penalty(q_proposed: torch.Tensor, log_density: torch.Tensor, q_data: torch.Tensor) -> torch.Tensor:
    """``sum_i mean_b [logsumexp_k (Q_i(s_b, a_bk) - log p_bk) - Q_i(s_b, a_b)]``.

    ``q_proposed``: ``[n, B, K]`` the critics at ``K`` proposed actions per state; ``log_density``:
    ``[B, K]`` the proposals' log densities; ``q_data``: ``[n, B]`` the critics at the data's actions.
    """
    return (torch.logsumexp(q_proposed - log_density, dim=-1) - q_data).mean(dim=1).sum()


def _repeat_rows(obs: Observation, times: int) -> Observation:
    """Each row of ``obs`` ``times`` times in a row (``[B * times, ...]``)."""
    if isinstance(obs, dict):
        return {key: value.repeat_interleave(times, dim=0) for key, value in obs.items()}
    return obs.repeat_interleave(times, dim=0)


class CQLPolicy(SACPolicy):
    """SAC with :func:`cql_penalty` on its critics; reads ``learn.cql_alpha`` (positive) and
    ``learn.cql_n_actions``."""

    def __init__(self, cfg: Any, seed: int = 0) -> None:
        super().__init__(cfg, seed)
        self._cql_alpha = float(cfg.learn.cql_alpha)
        self._cql_n_actions = int(cfg.learn.cql_n_actions)
        if self._cql_alpha <= 0.0:
            raise ValueError(f"cfg.learn.cql_alpha must be positive for cql (it is SAC at 0), got {self._cql_alpha}")

    def _critic_penalties(self, b: TransitionBatch, q: torch.Tensor) -> dict[str, torch.Tensor]:
        batch, k = q.shape[1], self._cql_n_actions
        obs = _repeat_rows(b.obs, k)
        with torch.no_grad():
            uniform = torch.rand((batch * k, self.actor.action_shape), generator=self._rng.learn,
                                 device=q.device, dtype=q.dtype) * 2.0 - 1.0
            action_s, log_pi_s = self.actor.sample(obs, self._rng.learn)
            action_next, log_pi_next = self.actor.sample(_repeat_rows(b.next_obs, k), self._rng.learn)
        uniform_log_density = torch.full((batch * k,), -self.actor.action_shape * math.log(2.0), device=q.device)
        actions = torch.cat([uniform, action_s, action_next])
        q_proposed = self.critic(_tile(obs, 3), actions)
        log_density = torch.cat([uniform_log_density, log_pi_s, log_pi_next])
        # [n, 3 * B * k] in blocks (uniform | pi(s) | pi(s')), each block's rows b-major: regroup to [n, B, 3k]
        q_proposed = q_proposed.view(q.shape[0], 3, batch, k).permute(0, 2, 1, 3).reshape(q.shape[0], batch, 3 * k)
        log_density = log_density.view(3, batch, k).permute(1, 0, 2).reshape(batch, 3 * k)
        return {"cql_penalty": self._cql_alpha * cql_penalty(q_proposed, log_density, q)}


def _tile(obs: Observation, times: int) -> Observation:
    """``obs`` ``times`` times over (``[times * B, ...]``, block after block)."""
    if isinstance(obs, dict):
        return {key: value.repeat(times, *([1] * (value.dim() - 1))) for key, value in obs.items()}
    return obs.repeat(times, *([1] * (obs.dim() - 1)))
