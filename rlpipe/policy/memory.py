"""The recurrent states one acting mode carries from one act to the next, one row per env."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch


class RecurrentMemory:
    """Each env's recurrent state between acts: ``[N, S]`` on the policy's device.

    Before each act its caller (a collector, an evaluator) calls :meth:`begin` with the envs whose
    current observation starts an episode; the act reads :attr:`state` and hands back the states
    after it through :meth:`advance`. ``initial_state(n)`` gives ``n`` zero states; it is called
    only when the states are (re)made, so a policy may pass a method of a network it builds later.
    """

    def __init__(self, initial_state: Callable[[int], torch.Tensor]) -> None:
        self._initial_state = initial_state
        self._state: torch.Tensor | None = None
        self._begun = False

    def begin(self, episode_start: np.ndarray) -> None:
        """Zero the states of the envs where ``episode_start`` (bool ``[N]``) is True, keep the others';
        the first call, or one with another number of envs, starts all ``N`` from zero."""
        start = np.asarray(episode_start, dtype=bool).reshape(-1)
        if self._state is None or self._state.shape[0] != start.shape[0]:
            self._state = self._initial_state(start.shape[0])
        elif start.any():
            restart = torch.as_tensor(start, device=self._state.device).unsqueeze(1)
            self._state = self._state.masked_fill(restart, 0.0)
        self._begun = True

    @property
    def state(self) -> torch.Tensor:
        """The states ``[N, S]`` the next act starts from; only defined after :meth:`begin`."""
        if not self._begun or self._state is None:
            raise RuntimeError("a recurrent policy's memory.begin(episode_start) must come before each act")
        return self._state

    def advance(self, new_state: torch.Tensor) -> None:
        """Take the states after an act; the next act waits for :meth:`begin` again."""
        self._state = new_state
        self._begun = False

    def stored(self) -> np.ndarray:
        """A float32 ``[N, S]`` copy of :attr:`state`: what the collector records as the row's ``core_state``."""
        return self.state.detach().to("cpu", torch.float32).numpy().copy()
