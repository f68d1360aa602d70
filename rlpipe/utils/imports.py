"""Objects named by import path (``package.module:Name``): the one way rlpipe imports what a table
or a config names (policy classes, encoders, remote backends, a user's own classes)."""
from __future__ import annotations

import importlib
from typing import Any

from rlpipe.errors import RlpipeError, first_line


class ImportPathError(RlpipeError, ImportError):
    """An import path whose module does not import or holds no such name; the message says which."""


def import_object(path: str) -> Any:
    """The object ``package.module:Name`` names, its module imported now; a one-line
    :class:`ImportPathError` when the path is malformed, the module fails to import or lacks the name."""
    module, sep, name = path.partition(":")
    if not sep or not module or not name:
        raise ImportPathError(f"'{path}' is not an import path of the form package.module:Name")
    try:
        imported = importlib.import_module(module)
    except Exception as err:  # a user's module may fail in any way while importing
        raise ImportPathError(f"cannot import module '{module}' ({first_line(err)})") from None
    found = getattr(imported, name, None)
    if found is None:
        raise ImportPathError(f"module '{module}' has no '{name}'")
    return found
