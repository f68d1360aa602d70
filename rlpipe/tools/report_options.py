"""What ``rlpipe report`` reports, as its command-line arguments and as an object; light to import
(the command line builds its parser from it without importing numpy or scipy)."""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from rlpipe.errors import RlpipeError


@dataclass(frozen=True)
class ReportOptions:
    """What to report: the results under ``paths`` (only ``groups``, if given), compared with
    ``baseline``, aggregated over tasks with ``normalise``, against ``threshold``, with each run's whole
    wall time when ``wall_time``; ``seed`` seeds the bootstrap."""

    paths: tuple[Path, ...]
    baseline: str | None = None
    normalise: str | None = None
    threshold: float | None = None
    groups: tuple[str, ...] = ()
    seed: int = 0
    wall_time: bool = False


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of :class:`ReportOptions` (``rlpipe report`` and the report blocks of docs share them)."""
    parser.add_argument("paths", type=Path, nargs="*", help="sweep directories, run directories or results files")
    parser.add_argument("--baseline", default=None, help="a group to compare every other with (P(X > Y))")
    parser.add_argument("--normalise", default=None,
                        help="aggregate over tasks on normalised scores: atari, minatar or a JSON/YAML file")
    parser.add_argument("--threshold", type=float, default=None,
                        help="the figure to reach (default: each run's env.stop_value)")
    parser.add_argument("--group", dest="groups", action="append", default=[],
                        help="report only this group (repeat for more; default: every group found)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the bootstrap")
    parser.add_argument("--wall-time", action="store_true",
                        help="also the wall time of whole runs (to their last evaluation) and, with --baseline, "
                             "its ratio to the baseline's")


def options_from(args: argparse.Namespace, root: Path = Path()) -> ReportOptions:
    """:class:`ReportOptions` from parsed :func:`add_report_arguments`; relative paths are taken from ``root``."""
    if not args.paths:
        raise RlpipeError("name at least one sweep directory, run directory or results file")
    normalise = args.normalise
    if normalise not in (None, "atari", "minatar"):
        normalise = str(root / normalise)
    return ReportOptions(tuple(root / path for path in args.paths), args.baseline, normalise, args.threshold,
                         tuple(args.groups), args.seed, args.wall_time)
