"""The reward-model interface the learner middleware talk to."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

__all__ = ["BaseRewardModel"]


class BaseRewardModel(ABC):
    """Rewrites the rewards of training data.

    ``estimate(train_data)`` returns the data with new rewards (or rewrites the batch it was
    given, never stored data). Learned models (RND, ICM) also learn from collected data in
    ``train(data)``; fixed ones, such as HER's goal relabelling, keep the no-op default.
    """

    @abstractmethod
    def estimate(self, train_data: Any) -> Any:
        """Return ``train_data`` with estimated rewards."""

    def train(self, data: Any) -> None:  # noqa: B027 (optional hook, empty by design)
        """Learn from collected data; a fixed reward model has nothing to learn."""
