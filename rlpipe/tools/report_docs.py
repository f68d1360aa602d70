"""Docs whose result tables come from result files: markdown report blocks, rewritten or checked.

A block is an HTML comment holding ``rlpipe report`` arguments, the report's markdown, and an end
comment; paths in it are taken from the markdown file's folder::

    <!-- rlpipe report results/cartpole.jsonl --baseline cartpole-dqn --plot cartpole.png -->
    ...what `rlpipe report` prints for those arguments...
    <!-- end report -->

``rlpipe report --docs FILE`` rewrites every block from its files (and draws its ``--plot``);
with ``--check`` it changes nothing and names the blocks that differ, which is how a test keeps
the docs' figures equal to what the committed result files give.
"""
from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

from rlpipe.errors import RlpipeError
from rlpipe.tools.report import make_report, plot_curves
from rlpipe.tools.report_options import add_report_arguments, options_from

BLOCK = re.compile(r"<!-- rlpipe report (?P<args>[^\n]*?) -->\n(?P<body>.*?)<!-- end report -->", re.DOTALL)


class ReportBlockError(RlpipeError, ValueError):
    """A report block whose arguments cannot be read; the message names the file and the block."""


class _BlockParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise ReportBlockError(message)


def _parser() -> argparse.ArgumentParser:
    parser = _BlockParser(prog="rlpipe report", add_help=False)
    add_report_arguments(parser)
    parser.add_argument("--plot", type=Path, default=None, help="draw the block's curves to this PNG")
    return parser


def render_block(arguments: str, root: Path, draw: bool) -> str:
    """The markdown a block with ``arguments`` holds; draws its ``--plot`` when ``draw``."""
    args = _parser().parse_args(shlex.split(arguments))
    report = make_report(options_from(args, root))
    if draw and args.plot is not None:
        plot_curves(report, root / args.plot)
    return report.to_markdown()


def update_report_blocks(path: Path, check: bool = False) -> list[str]:
    """Rewrite (or with ``check`` only compare) every report block of the markdown file ``path``;
    the arguments of the blocks that differed. A file without blocks is a one-line error."""
    text = path.read_text()
    stale: list[str] = []

    def rendered(match: re.Match[str]) -> str:
        try:
            body = render_block(match["args"], path.parent, draw=not check)
        except RlpipeError as err:
            raise ReportBlockError(f"{path}: report block '{match['args']}': {err}") from None
        if body != match["body"]:
            stale.append(match["args"])
        return f"<!-- rlpipe report {match['args']} -->\n{body}<!-- end report -->"

    updated, count = BLOCK.subn(rendered, text)
    if count == 0:
        raise ReportBlockError(f"{path} has no report block (<!-- rlpipe report ARGS --> ... <!-- end report -->)")
    if not check and updated != text:
        path.write_text(updated)
    return stale
