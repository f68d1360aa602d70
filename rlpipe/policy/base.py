"""What the pipeline needs from a policy: three modes, each with ``forward``, and a state dict.

The middleware call ``policy.learn_mode.forward(batch)`` (one gradient step),
``policy.collect_mode.forward(obs, eps)`` (exploring actions) and
``policy.eval_mode.forward(obs)`` (greedy actions; the DQN family also takes ``eps``,
``policy.eval.eps``), checkpoint through
``state_dict``/``load_state_dict``, hand the acting part of a learner's policy to remote
collectors through ``acting_state_dict``/``load_acting_state_dict``, and move scheduled
learning rates through ``set_learning_rate``. Nothing else about a policy is visible to them.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np

    from rlpipe.policy.memory import RecurrentMemory


class PolicyMode(NamedTuple):
    """One face of a policy: the function the pipeline calls in that role and, for the acting modes of
    a recurrent policy (R2D2), the memory of each env's recurrent state.

    A collector or evaluator whose mode has a ``memory`` calls, before each act,
    ``memory.begin(episode_start)`` (True for each env whose current observation starts an episode),
    reads ``memory.stored()`` for the row's ``core_state`` column (a collector), then
    ``forward(obs, ...)``, which acts from the memory's states and advances them. Without one
    (``None``: feedforward policies, and every ``learn_mode``) ``forward`` is all there is.

    A collect mode may also give ``initial_td``: a collected step batch (``obs``, ``action``,
    ``reward``, ``next_obs``, ``terminated`` and, with memory, ``core_state``) -> each row's
    ``|TD error|`` float32 ``[N]`` as the acting network estimates it, which the collector records
    as the rows' ``initial_td`` column (Ape-X's actor-side priorities).
    """

    forward: Callable[..., Any]
    memory: RecurrentMemory | None = None
    initial_td: Callable[[Mapping[str, Any]], np.ndarray] | None = None


@runtime_checkable
class Policy(Protocol):
    """The interface middleware rely on; any object with these members is a policy."""

    @property
    def learn_mode(self) -> PolicyMode: ...

    @property
    def collect_mode(self) -> PolicyMode: ...

    @property
    def eval_mode(self) -> PolicyMode: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state_dict: dict[str, Any]) -> None: ...

    def acting_state_dict(self) -> dict[str, Any]: ...

    def load_acting_state_dict(self, state_dict: Mapping[str, Any]) -> None: ...

    def set_learning_rate(self, key: str, lr: float) -> None: ...


@runtime_checkable
class RecurrentPolicy(Policy, Protocol):
    """A policy with memory (r2d2), acting from explicit states as well as from its modes' memories."""

    def initial_state(self, n: int) -> Any:
        """``n`` fresh states (a tensor ``[n, S]``): an episode's start."""

    def act(self, obs: Any, state: Any, eps: float = 0.0) -> tuple[Any, Any]:
        """Actions for ``obs`` ``[N, ...]`` from ``state`` ``[N, S]``, and the states after them."""

