"""What a training run takes besides its config, as one object: ``rlpipe train`` / ``rlpipe resume``
and ``rlpipe.train`` build the same :class:`TrainOptions` (with the same names: ``--run-dir`` is
``run_dir``, ``--overwrite`` is ``overwrite``, ``rlpipe resume`` is ``resume=True``, ...) and call
:func:`rlpipe.entry.train.run_training` with it."""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rlpipe.errors import RlpipeError
from rlpipe.recipes.hooks import Hook
from rlpipe.recipes.pipeline import Middleware, check_insertion_points


class ArgumentError(RlpipeError, ValueError):
    """An option of a training run is of the wrong kind or contradicts another; the message names it."""


@dataclass(frozen=True)
class TrainOptions:
    """How to run a config: where, whether to continue or start again, and what to add to the pipeline."""

    run_dir: Path | None = None
    """Where the run writes (None: ``runs/<exp_name>-seed<seed>``, :func:`~rlpipe.entry.train.default_run_dir`)."""
    resume: bool = False
    """Continue the run in ``run_dir`` from its latest checkpoint and saved buffer."""
    overwrite: bool = False
    """Start again in a ``run_dir`` that holds a run: its files are removed once the new run's checks passed."""
    overwrite_empty: bool = False
    """Start again in a ``run_dir`` whose run stopped before its first checkpoint (nothing to resume)."""
    allow_unsealed: bool = False
    """Load checkpoints written before rlpipe sealed them, unverified (with a warning)."""
    middleware: Mapping[str, Sequence[Middleware]] = field(default_factory=dict)
    """Your own middleware at named points of the pipeline (:data:`~rlpipe.recipes.pipeline.INSERTION_POINTS`)."""
    hooks: Sequence[Hook] = ()
    """Callables run after every iteration with a :class:`~rlpipe.recipes.hooks.RunView`; one returning
    False stops the run as a stop signal does."""
    announce: Callable[[str], None] | None = None
    """Given the run's first line (what trains where) once the checks have passed."""

    def __post_init__(self) -> None:
        if self.overwrite and self.resume:
            raise ArgumentError("pass overwrite=True or resume=True, not both")
        if callable(self.hooks):
            raise ArgumentError(f"hooks must be a list of callables, got the single callable {self.hooks!r}: "
                                "pass hooks=[...]")
        wrong = [hook for hook in self.hooks if not callable(hook)]
        if wrong:
            raise ArgumentError(f"hooks must be callables taking a RunView; {wrong[0]!r} is not callable")
        check_insertion_points(self.middleware)
        if self.run_dir is not None:
            object.__setattr__(self, "run_dir", Path(self.run_dir))
        object.__setattr__(self, "hooks", tuple(self.hooks))
