"""A policy's random streams, all from one seed: numpy generators for epsilon-greedy acting and
torch generators for the noise of acting and of updates, reseeded and saved together."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

EVALUATION_STREAM = 1
"""The spawn key of the evaluation generator's seed: a stream apart from exploration's."""


def learn_seed(seed: int) -> int:
    """The ``learn`` generator's seed: a number derived from ``seed``, so that it differs from ``collect``'s."""
    return int(np.random.SeedSequence(seed).generate_state(1, dtype=np.uint64)[0])


class RandomStreams:
    """The generators a policy draws from; it has only those it asks for.

    With ``epsilon``, two numpy generators for epsilon-greedy acting: ``exploration``
    (``collect_mode``) and ``evaluation`` (``eval_mode``'s epsilon, a stream of its own so that
    evaluating draws nothing from exploration's). With ``device``, two torch generators on it:
    ``collect`` (acting's noise: a Gaussian actor's sample, TD3's exploration noise, noisy
    layers) and ``learn`` (the updates' noise).

    :meth:`seed` reseeds the acting streams (``exploration``, ``evaluation``, ``collect``), never
    ``learn``. Every stream is seeded from ``seed`` at once. (Until December 2026 the noisy
    Q-policies' ``collect`` started from torch's default seed, so their acting noise was the
    same in every run and every remote collector whatever the seed.)
    """

    exploration: np.random.Generator
    evaluation: np.random.Generator
    collect: torch.Generator
    learn: torch.Generator

    def __init__(self, seed: int, *, epsilon: bool, device: torch.device | None = None) -> None:
        self._epsilon = epsilon
        self._noise = device is not None
        if device is not None:
            self.collect = torch.Generator(device=device)
            self.learn = torch.Generator(device=device)
            self.learn.manual_seed(learn_seed(seed))
            self.collect.manual_seed(seed)
        if epsilon:
            self._seed_epsilon(seed)

    def _seed_epsilon(self, seed: int) -> None:
        evaluation = np.random.SeedSequence(seed, spawn_key=(EVALUATION_STREAM,))
        self.exploration, self.evaluation = np.random.default_rng(seed), np.random.default_rng(evaluation)

    def seed(self, seed: int) -> None:
        """Reseed the acting streams from ``seed``; ``learn`` goes on."""
        if self._epsilon:
            self._seed_epsilon(seed)
        if self._noise:
            self.collect.manual_seed(seed)

    def state_dict(self) -> dict[str, Any]:
        """``exploration``'s bit generator state under ``eps`` and the torch generators' under
        ``collect`` and ``learn``; the evaluation stream starts again from the seed in a resumed
        run, as the evaluator's envs do. Epsilon-greedy alone (DQN) saves exploration's state
        itself, not under ``eps``: the layout its checkpoints have always had."""
        if not self._noise:
            return dict(self.exploration.bit_generator.state) if self._epsilon else {}
        state: dict[str, Any] = {"eps": dict(self.exploration.bit_generator.state)} if self._epsilon else {}
        return {**state, "collect": self.collect.get_state(), "learn": self.learn.get_state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        if self._epsilon:
            self.exploration.bit_generator.state = state["eps"] if self._noise else state
        if self._noise:
            self.collect.set_state(state["collect"])
            self.learn.set_state(state["learn"])
