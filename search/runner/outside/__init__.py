"""Sessions that run the user's own trainer (a command or a Python function) on a worker, one file per kind."""

from search.runner.outside.command import CommandSession
from search.runner.outside.python import PythonSession

__all__ = ["CommandSession", "PythonSession"]
