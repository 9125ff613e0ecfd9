"""`kind = "python"`: a function of the user's, called in the worker's own process.

    [trainer]
    kind = "python"
    function = "train_gpt:run"        # module:callable
    path = ["examples/own_trainer"]   # folders put on sys.path first (the module need not be installed)
    options = { lr = 3e-3 }           # anything else the function reads, as request.options

The function gets a `TrialRequest` and a `Reporter` and reports the protocol's events by calling
`reporter.start(n_params=...)`, `reporter.evaluated(step=..., tokens=..., val_loss=...)` and
`reporter.end(val_loss=..., tokens_per_s=..., n_params=...)`; each is checked against the same schema as a
command's lines. It runs on a thread of the worker, in step with the driver: `evaluated` returns when the driver
asks for the next interval, and raises `TrialStopped` (a BaseException, so `except Exception` lets it through) when
the trial is pruned. A Python thread cannot be killed: a function silent past `time_limit_s` fails its trial, but
its thread is only asked to stop at its next report; for code that may hang, use `kind = "command"`.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import queue
import sys
import threading
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from search.trainers._base import TrainerSettings, check_event

_FUNCTION = r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$"


class TrialStopped(BaseException):
    """Raised inside the user's function by `Reporter.evaluated` when the driver stops the trial (pruned)."""


class PythonTrainer(TrainerSettings):
    kind: Literal["python"] = Field("python", description="your function trains each trial on a worker thread")
    function: str = Field(pattern=_FUNCTION, description="module:callable, called with (request, reporter)")
    path: list[str] = Field(default_factory=list, description="folders put first on sys.path in each worker")
    options: dict[str, Any] = Field(default_factory=dict, description="handed to the function as request.options")

    @field_validator("path")
    @classmethod
    def _absolute(cls, v: list[str]) -> list[str]:
        return [str(Path(p).absolute()) for p in v]

    @model_validator(mode="after")
    def _function_exists(self, info: ValidationInfo) -> PythonTrainer:
        """The module found and the name defined in it, read without importing it (it may import torch)."""
        if (info.context or {}).get("stored"):
            return self
        module, name = self.function.split(":")
        sys.path[:0] = self.path
        try:
            spec = importlib.util.find_spec(module)
        except ImportError:  # a parent package that does not exist
            spec = None
        finally:
            del sys.path[: len(self.path)]
        if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
            where = f" or in {', '.join(self.path)}" if self.path else ""
            raise ValueError(
                f"function {self.function!r}: no module {module!r} on sys.path{where}; install it or add its folder to trainer.path"
            )
        tree = ast.parse(Path(spec.origin).read_bytes())
        if name not in _top_level_names(tree):
            raise ValueError(f"function {self.function!r}: {spec.origin} defines no {name!r}; fix the name after the ':'")
        return self


def _top_level_names(tree: ast.Module) -> set[str]:
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def load_function(function: str, path: list[str]):
    for folder in reversed(path):
        if folder not in sys.path:
            sys.path.insert(0, folder)
    module, name = function.split(":")
    return getattr(importlib.import_module(module), name)


class Reporter:
    """What the user's function reports through; each call is one protocol event, its keyword arguments the event's
    fields (protocol.schema.json)."""

    EVENTS: ClassVar[dict[str, str]] = {"start": "start", "evaluated": "eval", "end": "end"}  # method -> its protocol event

    def __init__(self, where: str):
        self._where, self._count = where, 0
        self._events: queue.Queue = queue.Queue()
        self._go = threading.Semaphore(0)
        self._stopping = False

    def _put(self, event: dict) -> None:
        self._count += 1
        self._events.put(check_event(event, f"{self._where} report {self._count}"))

    def start(self, **fields: Any) -> None:
        """Once the model is built: its parameter count (the neutrality check compares it with uniform's)."""
        self._put({"event": "start", **fields})

    def evaluated(self, **fields: Any) -> None:
        """Hand the evaluation to the driver; returns when it asks for more, raises TrialStopped when it prunes."""
        self._put({"event": "eval", **fields})
        self._go.acquire()
        if self._stopping:
            raise TrialStopped

    def end(self, **fields: Any) -> None:
        """When training is done: the final val loss (the objective) and the trainer's own tokens/s."""
        self._put({"event": "end", **fields})
