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
from typing import Any, NamedTuple, Protocol, runtime_checkable


class PolicyMode(NamedTuple):
    """One face of a policy: the function the pipeline calls in that role."""

    forward: Callable[..., Any]


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
