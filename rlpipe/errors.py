"""The base of every error a user can fix (a config key, a file, a diverged run).

The command line prints these as one line; any other exception is a bug and keeps its traceback.
"""


def first_line(err: BaseException) -> str:
    """The first non-empty line of ``err``'s message, or its type's name when it has none: the
    reason a one-line error quotes from a library's (often many-line) exception."""
    return next((line.strip() for line in str(err).splitlines() if line.strip()), type(err).__name__)


class RlpipeError(Exception):
    """An error caused by the user's input or run, with a one-line message naming what is wrong."""


class MissingDependencyError(RlpipeError, ImportError):
    """An optional dependency needed for this feature is not installed."""


class EnvironmentFailedError(RlpipeError, RuntimeError):
    """An environment kept failing (raising, hanging or dying) however often it was recreated."""
