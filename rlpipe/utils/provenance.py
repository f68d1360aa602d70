"""Which code runs: the git commit of the rlpipe source, for the records runs and datasets keep."""
from __future__ import annotations

import subprocess
from pathlib import Path


def code_version() -> str:
    """The git commit of the rlpipe source that runs (``+dirty`` with uncommitted changes), else its version."""
    from rlpipe import __version__

    root = Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                                text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no", "rlpipe"],
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return f"rlpipe {__version__}"
    return f"{commit}{'+dirty' if dirty else ''}" if commit else f"rlpipe {__version__}"
