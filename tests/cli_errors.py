"""The check every command-line error test makes: exit status 2 and one line on stderr."""
from __future__ import annotations

from rlpipe.cli.main import main


def one_line_error(capsys, argv: list[str]) -> str:
    """Run ``rlpipe ARGV``; assert it failed with one line and no traceback; return that line."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    return err
