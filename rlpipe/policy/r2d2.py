"""R2D2 (Kapturowski et al., 2019, "Recurrent Experience Replay in Distributed Reinforcement
Learning"): a recurrent Q-network learned from replayed sequences, with the collector's recurrent
state stored at each sequence's start, a burn-in that warms the state up without gradient, n-step
double-Q targets under value rescaling, and sequence priorities mixing the max and the mean TD error.
DRQN (Hausknecht & Stone, 2015) is its settings ``learn.stored_state: false`` (every sequence starts
from the zero state) and ``learn.burn_in: 0``.

The return computation is pure functions of tensors (:func:`value_rescale`,
:func:`inverse_value_rescale`, :func:`nstep_sequence_targets`, :func:`sequence_priority`,
:func:`r2d2_loss`); :class:`R2D2Policy` wires them into the DQN family's frame
(:mod:`rlpipe.policy.q_learning`: optimizer, target updates, epsilon-greedy acting).

A learning batch is ``B`` sequences of ``T`` rows (what the sequence buffer samples), every row a
transition of one env, the rows in order and within one episode (rows after an episode's end are
padding, ``mask`` False):

    obs, next_obs  [B, T, *obs_shape], their own dtype
    action         int64 [B, T]
    reward         float32 [B, T]
    terminated     bool [B, T]
    truncated      bool [B, T]
    mask           bool [B, T], False on padding
    core_state     float32 [B, S], the collector's state before the first row (read with stored_state)
    weight         float32 [B], optional importance weights

The n-step return is computed here, inside each sequence: the pipeline stores one-step rows.

Deviations from the paper: the loss is the DQN family's Huber loss (on value-rescaled TD errors,
which are mostly below 1, so it is half the squared error the paper uses), and targets come from
the target network's pass over the same sequence (the paper's too) with each row's bootstrap value
taken at its own ``next_obs`` from the state after the row, so a truncated episode's last row
bootstraps from its true next observation.

Metrics returned by ``learn_mode.forward``:
    total_loss  Huber TD loss over the learned rows (not burn-in, not padding), importance-weighted
                per sequence when ``weight`` is given.
    q_value     mean online Q over the learned rows and all actions.
    priority    per sequence, np.float32 [B]: ``eta * max_t |td| + (1 - eta) * mean_t |td|``.
    cur_lr      learning rate of the step.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import nn

from rlpipe.model.recurrent import RecurrentQ, map_obs
from rlpipe.policy.frame import ArrayLike, Observation, model_shapes, per_sample
from rlpipe.policy.memory import RecurrentMemory
from rlpipe.policy.q_learning import QLearningPolicy
from rlpipe.utils.batch import terminated_of

VALUE_RESCALE_EPS = 1e-3
"""R2D2's ``eps`` in ``h(x) = sign(x) (sqrt(|x| + 1) - 1) + eps x``."""


def value_rescale(x: torch.Tensor, eps: float = VALUE_RESCALE_EPS) -> torch.Tensor:
    """``h(x) = sign(x) (sqrt(|x| + 1) - 1) + eps x`` (Pohlen et al., 2018), elementwise."""
    magnitude = x.abs()
    return torch.sign(x) * magnitude / (torch.sqrt(magnitude + 1.0) + 1.0) + eps * x  # sqrt(a+1)-1 = a/(sqrt(a+1)+1)


def inverse_value_rescale(y: torch.Tensor, eps: float = VALUE_RESCALE_EPS) -> torch.Tensor:
    """``h^-1(y)``, elementwise: ``sign(y) (s^2 - 1)`` with ``s = sqrt(|x| + 1)`` the positive root of
    ``eps s^2 + s - (1 + eps + |y|) = 0``, written without the root formula's cancellation."""
    a = 1.0 + eps + y.abs()
    s = 2.0 * a / (torch.sqrt(1.0 + 4.0 * eps * a) + 1.0)
    return torch.sign(y) * (s * s - 1.0)


def _ahead(x: torch.Tensor, k: int, fill: float | bool) -> torch.Tensor:
    """``x`` ``[B, T]`` read ``k`` rows ahead: row ``t`` holds ``x[:, t + k]``, ``fill`` past the end."""
    if k == 0:
        return x
    return torch.cat([x[:, k:], x.new_full((x.shape[0], min(k, x.shape[1])), fill)], dim=1)[:, :x.shape[1]]


def nstep_sequence_targets(
    reward: torch.Tensor,
    bootstrap: torch.Tensor,
    terminated: torch.Tensor,
    truncated: torch.Tensor,
    mask: torch.Tensor,
    gamma: float,
    nstep: int,
    rescale: bool = True,
) -> torch.Tensor:
    """The n-step targets ``[B, T]`` of every row of ``B`` sequences of ``T`` rows.

    Row ``t``'s window ends at ``j = min(t + n - 1, e)``, ``e`` the first row from ``t`` on that ends
    its episode (``terminated`` or ``truncated``), is followed by padding, or is the sequence's last:
    ``G = sum_{k=t..j} gamma^(k-t) r_k + gamma^(j-t+1) (1 - terminated_j) Q_j``, where ``Q_j`` is
    ``bootstrap[:, j]``, the value of ``next_obs_j``. With ``rescale`` the bootstrap values are
    value-rescaled (the network's outputs) and the target is ``h(sum + gamma^.. h^-1(Q_j))``.
    Padding rows get 0.

    Args:
        reward: float ``[B, T]``.
        bootstrap: float ``[B, T]``, the value of each row's ``next_obs`` (no gradient).
        terminated: bool ``[B, T]``, no bootstrap after the row.
        truncated: bool ``[B, T]``, the episode ended after the row without terminating.
        mask: bool ``[B, T]``, False on padding rows.
        gamma: the discount. nstep: ``n >= 1``.
    """
    value = inverse_value_rescale(bootstrap) if rescale else bootstrap
    window_ends = terminated | truncated | ~_ahead(mask, 1, False)  # no row of this episode follows
    ret = torch.zeros_like(reward)
    bootstrapped = torch.zeros_like(reward)
    open_ = mask.clone()  # row t's window still reaches row t + k
    for k in range(nstep):
        ret = ret + torch.where(open_, gamma**k * _ahead(reward, k, 0.0), 0.0)
        ends = _ahead(window_ends, k, True)
        closes = open_ & (ends | (k == nstep - 1))
        keep = closes & ~_ahead(terminated, k, True)
        bootstrapped = bootstrapped + torch.where(keep, gamma ** (k + 1) * _ahead(value, k, 0.0), 0.0)
        open_ = open_ & ~ends
    target = ret + bootstrapped
    return torch.where(mask, value_rescale(target), 0.0) if rescale else target


def sequence_priority(td_abs: torch.Tensor, valid: torch.Tensor, eta: float) -> torch.Tensor:
    """R2D2's priority per sequence ``[B]``: ``eta * max_t |td| + (1 - eta) * mean_t |td|`` over the
    ``valid`` rows (bool ``[B, T]``) of ``td_abs`` ``[B, T]``; 0 for a sequence without one."""
    td_abs = torch.where(valid, td_abs, 0.0)
    mean = td_abs.sum(dim=1) / valid.sum(dim=1).clamp(min=1)
    return eta * td_abs.amax(dim=1) + (1.0 - eta) * mean


def r2d2_loss(
    q_sa: torch.Tensor, target: torch.Tensor, valid: torch.Tensor, weight: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The Huber TD loss of the ``valid`` rows and the TD errors ``target - q_sa`` ``[B, T]`` (no gradient).

    ``q_sa`` ``[B, T]`` (differentiable), ``target`` ``[B, T]``, ``valid`` bool ``[B, T]``, ``weight``
    ``[B]`` per sequence or None. The loss is ``sum(valid * weight * huber) / count(valid)``."""
    huber = nn.functional.smooth_l1_loss(q_sa, target.detach(), reduction="none")
    if weight is not None:
        huber = huber * weight.unsqueeze(1)
    loss = torch.where(valid, huber, 0.0).sum() / valid.sum().clamp(min=1)
    return loss, target.detach() - q_sa.detach()


class SequenceBatch(NamedTuple):
    """A learning batch of ``B`` sequences of ``T`` rows as tensors on the policy's device."""

    obs: Observation  # [B, T, *obs_shape], its own dtype
    action: torch.Tensor  # int64 [B, T]
    reward: torch.Tensor  # float32 [B, T]
    next_obs: Observation  # [B, T, *obs_shape]
    terminated: torch.Tensor  # bool [B, T]
    truncated: torch.Tensor  # bool [B, T]
    mask: torch.Tensor  # bool [B, T]
    core_state: torch.Tensor | None  # float32 [B, S], None unless learn.stored_state
    weight: torch.Tensor | None  # float32 [B]


class R2D2Policy(QLearningPolicy):
    """R2D2 on the DQN family's frame, with :class:`~rlpipe.model.recurrent.RecurrentQ`.

    Besides what :class:`~rlpipe.policy.q_learning.QLearningPolicy` reads (``discount_factor``,
    ``nstep``, ``learn.double_q``, ...), it reads ``learn.burn_in`` (absent: 0),
    ``learn.value_rescale`` (absent: True), ``learn.priority_eta`` (absent: 0.9),
    ``learn.stored_state`` (absent: True) and, building the network, ``model.core``,
    ``model.core_hidden`` and ``model.dueling``. ``model`` replaces that network: any module with
    :class:`RecurrentQ`'s ``forward(obs, state)``, ``step`` and ``initial_state``.

    ``collect_mode`` and ``eval_mode`` each carry a :class:`~rlpipe.policy.memory.RecurrentMemory`
    (see :class:`~rlpipe.policy.base.PolicyMode`); :meth:`act` acts from given states. The memories
    are not checkpointed: a resumed run starts new episodes, whose first ``begin`` zeroes them.
    With ``collect.initial_priority`` (absent: off) ``collect_mode`` also gives :meth:`initial_td`.
    """

    model: RecurrentQ
    target_model: RecurrentQ

    def __init__(self, cfg: Any, model: nn.Module | None = None, seed: int = 0) -> None:
        learn = cfg.learn
        self._burn_in = int(getattr(learn, "burn_in", 0))
        self._value_rescale = bool(getattr(learn, "value_rescale", True))
        self._priority_eta = float(getattr(learn, "priority_eta", 0.9))
        self._stored_state = bool(getattr(learn, "stored_state", True))
        if self._burn_in < 0 or not 0.0 <= self._priority_eta <= 1.0:
            raise ValueError(f"cfg.learn.burn_in must be >= 0 and cfg.learn.priority_eta in [0, 1], got "
                             f"{self._burn_in} and {self._priority_eta}")
        super().__init__(cfg, model, seed)
        if getattr(getattr(cfg, "collect", None), "initial_priority", False):
            self.collect_mode = self.collect_mode._replace(initial_td=self.initial_td)

    def build_model(self, model_cfg: Any) -> nn.Module:
        obs_space, action_shape = model_shapes(model_cfg)
        return RecurrentQ.from_config(obs_space, action_shape, model_cfg)

    def _acting_memory(self) -> RecurrentMemory:
        return RecurrentMemory(self.initial_state)

    def initial_state(self, n: int) -> torch.Tensor:
        """Zero states ``[n, S]`` on the policy's device: an episode's start."""
        return self.model.initial_state(n)

    # ---- learning ------------------------------------------------------------------------
    def _forward_learn(self, batch: Mapping[str, ArrayLike]) -> dict[str, Any]:
        """One update on a batch of sequences: burn-in, then the online values of the learned rows, the
        n-step targets from both networks' states along the sequence, the loss and the priorities."""
        b = self._sequence_batch(batch)
        n_sequences, steps = b.action.shape
        if self._burn_in >= steps:
            raise ValueError(f"cfg.learn.burn_in ({self._burn_in}) must be shorter than the sequences ({steps} rows)")
        start = b.core_state if b.core_state is not None else self.initial_state(n_sequences)
        q, online_states = self._unroll(b.obs, start)  # q of the learned rows [B, T - burn_in, A]
        with torch.no_grad():
            _, target_states = self.target_model(b.obs, start)
            bootstrap = self._bootstrap(b.next_obs, online_states, target_states)
            target = nstep_sequence_targets(b.reward, bootstrap, b.terminated, b.truncated, b.mask, self._gamma,
                                            self._nstep, self._value_rescale)
        learned = slice(self._burn_in, None)
        q_sa = q.gather(2, b.action[:, learned].unsqueeze(2)).squeeze(2)
        valid = b.mask[:, learned]
        loss, td_error = r2d2_loss(q_sa, target[:, learned], valid, b.weight)
        priority = sequence_priority(td_error.abs(), valid, self._priority_eta)
        self._gradient_step(loss)
        return self._learn_output(loss, q.detach()[valid], priority)

    def _unroll(self, obs: Observation, start: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The online network over the sequences from ``start``: the first ``burn_in`` rows without
        gradient, the rest with. Returns the learned rows' values ``[B, T - burn_in, A]`` and the
        states after every row ``[B, T, S]`` (no gradient)."""
        if self._burn_in == 0:
            q, states = self.model(obs, start)
            return q, states.detach()
        with torch.no_grad():
            _, burn_states = self.model(map_obs(obs, lambda o: o[:, :self._burn_in]), start)
        q, states = self.model(map_obs(obs, lambda o: o[:, self._burn_in:]), burn_states[:, -1])
        return q, torch.cat([burn_states, states.detach()], dim=1)

    def _bootstrap(self, next_obs: Observation, online_states: torch.Tensor,
                   target_states: torch.Tensor) -> torch.Tensor:
        """The target network's value ``[B, T]`` of each row's ``next_obs``, one step from its state
        after the row, at the online network's greedy action (``learn.double_q``) or its own."""
        n_sequences, steps, state_size = target_states.shape
        rows = map_obs(next_obs, lambda o: o.flatten(0, 1))
        q_target, _ = self.target_model.step(rows, target_states.reshape(-1, state_size))
        chooser = self.model.step(rows, online_states.reshape(-1, state_size))[0] if self._double_q else q_target
        return q_target.gather(1, chooser.argmax(dim=1, keepdim=True)).view(n_sequences, steps)

    def _sequence_batch(self, batch: Mapping[str, Any]) -> SequenceBatch:
        """A batch of sequences (module docstring) as tensors; ``core_state`` is read only with
        ``learn.stored_state``."""
        missing = [name for name in ("obs", "action", "reward", "next_obs", "mask") if name not in batch]
        if self._stored_state and "core_state" not in batch:
            missing.append("core_state (or learn.stored_state: false)")
        if missing:
            raise ValueError(f"a batch of sequences for r2d2 lacks the fields {', '.join(missing)}")

        def column(name: str, dtype: torch.dtype) -> torch.Tensor:
            return torch.as_tensor(batch[name], dtype=dtype, device=self._device)

        action = column("action", torch.int64)
        columns = {name: column(name, dtype) for name, dtype in (("reward", torch.float32), ("mask", torch.bool))}
        # the seed's ``done`` stands for terminated (one warning); without ``truncated`` no episode was cut
        columns["terminated"] = torch.as_tensor(terminated_of(batch, "r2d2"), dtype=torch.bool, device=self._device)
        columns["truncated"] = (column("truncated", torch.bool) if "truncated" in batch
                                else torch.zeros_like(columns["terminated"]))
        for name, value in {"action": action, **columns}.items():
            if value.dim() != 2 or value.shape != action.shape:
                raise ValueError(f"batch field '{name}' must be [B, T] like 'action' {tuple(action.shape)}, "
                                 f"got shape {tuple(value.shape)}")
        weight = column("weight", torch.float32) if "weight" in batch else None
        return SequenceBatch(
            self._observations(batch["obs"]), action, self._scaled_rewards(columns["reward"]),
            self._observations(batch["next_obs"]),
            columns["terminated"], columns["truncated"], columns["mask"],
            column("core_state", torch.float32) if self._stored_state else None,
            None if weight is None else per_sample("weight", weight, "one importance weight per sequence"),
        )

    @torch.no_grad()
    def initial_td(self, step: Mapping[str, Any]) -> np.ndarray:
        """Each collected row's one-step ``|TD error|`` float32 ``[N]`` as the acting (online) network
        sees it, from the row's ``core_state``: ``|h(k r + gamma (1 - terminated) h^-1(Q(s', a*))) - Q(s, a)|``
        (``h`` the value rescaling when on, ``k`` ``learn.reward_scale``, ``a*`` the greedy action at
        ``s'`` from the state after ``s``). Ape-X's actors estimate the priorities of what they send
        with their copy of the network; one step and no target network keep the collector's cost at
        two more steps of its network per row."""
        state = torch.as_tensor(step["core_state"], dtype=torch.float32, device=self._device)
        q, after = self.model.step(self._observations(step["obs"]), state)
        q_next, _ = self.model.step(self._observations(step["next_obs"]), after)
        action = torch.as_tensor(step["action"], dtype=torch.int64, device=self._device)
        reward = self._scaled_rewards(torch.as_tensor(step["reward"], dtype=torch.float32, device=self._device))
        terminated = torch.as_tensor(step["terminated"], dtype=torch.bool, device=self._device).unsqueeze(1)
        one_row = torch.ones_like(terminated)  # each row a sequence of one step: its one-step target
        target = nstep_sequence_targets(reward.unsqueeze(1), q_next.max(dim=1, keepdim=True).values, terminated,
                                        ~one_row, one_row, self._gamma, 1, self._value_rescale)
        td = target[:, 0] - q.gather(1, action.unsqueeze(1)).squeeze(1)
        return td.abs().float().cpu().numpy()

    # ---- acting ----------------------------------------------------------------------------
    def act(self, obs: ArrayLike, state: ArrayLike, eps: float = 0.0) -> tuple[np.ndarray, torch.Tensor]:
        """Epsilon-greedy actions int64 ``[N]`` (from the exploration generator) for ``obs`` ``[N, ...]``
        from ``state`` ``[N, S]``, and the states after them ``[N, S]``; no memory is touched."""
        return self._act(obs, state, eps, self._rng.exploration)

    @torch.no_grad()
    def _act(self, obs: ArrayLike, state: ArrayLike, eps: float,
             rng: np.random.Generator) -> tuple[np.ndarray, torch.Tensor]:
        q, new_state = self.model.step(self._observations(obs),
                                       torch.as_tensor(state, dtype=torch.float32, device=self._device))
        return self._epsilon_greedy(q, eps, rng), new_state

    def _act_from(self, memory: RecurrentMemory | None, obs: ArrayLike, eps: float,
                  rng: np.random.Generator) -> np.ndarray:
        assert memory is not None  # _acting_memory gave each acting mode one
        action, new_state = self._act(obs, memory.state, eps, rng)
        memory.advance(new_state)
        return action

    def _forward_collect(self, obs: ArrayLike, eps: float = 0.0) -> np.ndarray:
        """Epsilon-greedy actions int64 ``[N]`` from ``collect_mode.memory``'s states, which advance."""
        return self._act_from(self.collect_mode.memory, obs, eps, self._rng.exploration)

    def _forward_eval(self, obs: ArrayLike, eps: float = 0.0) -> np.ndarray:
        """Greedy (with ``eps``, epsilon-greedy from the evaluation generator) actions int64 ``[N]`` from
        ``eval_mode.memory``'s states, which advance; the collector's stay as they are."""
        return self._act_from(self.eval_mode.memory, obs, eps, self._rng.evaluation)
