"""`kind = "command"`: the user's own training script, one process (group) per trial.

    [trainer]
    kind = "command"
    argv = ["{python}", "train.py", "--heads", "{heads}", "--seed", "{seed}", "--steps", "{steps}"]
    cwd = "path/to/repo"

Each trial runs argv (placeholders filled in: PLACEHOLDERS) in cwd, in a process group of its own, with
$PRISM_TRAINER_REPORT naming the file it appends its protocol lines to (search.trainers._base). This module is the
section and its placeholders; the session that starts, watches and ends the process is search.runner.outside.command.
"""

from __future__ import annotations

import os
import shutil
import string
import sys
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from search.trainers._base import TrainerSettings, TrialRequest

PLACEHOLDERS = {
    "schedule": "the schedule as HEADSxLAYERS runs, e.g. 2x1,4x2",
    "heads": "one head count per layer, comma-separated, e.g. 2,4,4",
    "seed": "the trial's seed",
    "steps": "training steps ([train] steps)",
    "tokens": "training tokens: steps x batch_size x block_size",
    "eval_every": "steps between evaluations",
    "trial_dir": "the trial's own folder",
    "device": "cpu or cuda",
    "corpus": "the corpus file",
    "python": "the worker's Python interpreter",
    "d_model": "[model] d_model",
    "n_layer": "[model] n_layer",
    "block_size": "[model] block_size",
    "batch_size": "[train] batch_size",
}
SCHEDULE_PLACEHOLDERS = ("schedule", "heads")


def placeholders_in(template: str) -> list[str]:
    """The {names} of one argv entry ({{ and }} are literal braces)."""
    return [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]


class CommandTrainer(TrainerSettings):
    kind: Literal["command"] = Field("command", description="your command runs each trial, one process group per trial")
    argv: list[str] = Field(
        min_length=1, description="the trainer's command line; placeholders: " + ", ".join(f"{{{p}}}" for p in PLACEHOLDERS)
    )
    cwd: str = Field(".", validate_default=True, description="where it runs (a path relative to the directory prism-search runs in)")
    env: dict[str, str] = Field(default_factory=dict, description="environment entries on top of the worker's")
    grace_s: float = Field(5.0, ge=0, le=3600, description="after SIGTERM, how long the trainer has before SIGKILL")

    @field_validator("argv")
    @classmethod
    def _known_placeholders(cls, v: list[str]) -> list[str]:
        names = []
        for entry in v:
            try:
                names += placeholders_in(entry)
            except ValueError as e:
                raise ValueError(f"{entry!r}: {e} (fix: write literal braces as {{{{ and }}}})") from None
        if unknown := [n for n in names if n not in PLACEHOLDERS]:
            raise ValueError(f"unknown placeholder {{{unknown[0]}}}; use {', '.join(f'{{{p}}}' for p in PLACEHOLDERS)}")
        if not any(n in SCHEDULE_PLACEHOLDERS for n in names):
            raise ValueError("the command is never told the schedule; pass {heads} (2,4,4) or {schedule} (2x1,4x2) in argv")
        return v

    @field_validator("cwd")
    @classmethod
    def _absolute(cls, v: str, info: ValidationInfo) -> str:
        """Absolute, since Ray workers run elsewhere; a stored study's folder is taken as stored."""
        path = Path(v).absolute()
        if not (info.context or {}).get("stored") and not path.is_dir():
            raise ValueError(f"{v!r} is not a folder; point cwd at the trainer's repository")
        return str(path)

    @model_validator(mode="after")
    def _executable_exists(self, info: ValidationInfo) -> CommandTrainer:
        if (info.context or {}).get("stored") or self.argv[0] == "{python}":
            return self
        program = self.argv[0]
        if placeholders_in(program):
            raise ValueError(f"argv[0] {program!r}: the program must be a name or path ({{python}} is the one placeholder allowed there)")
        found = shutil.which(program, path=self.env.get("PATH")) if "/" not in program else None
        path = Path(self.cwd, program) if "/" in program else None
        if not found and not (path and path.is_file() and os.access(path, os.X_OK)):
            raise ValueError(f"argv[0] {program!r}: no such executable (on PATH, or relative to cwd {self.cwd}); fix the name or its path")
        return self


def _values(request: TrialRequest) -> dict[str, str]:
    values = {
        "schedule": request.schedule,
        "heads": ",".join(map(str, request.heads)),
        "python": sys.executable,
    }
    return values | {name: str(getattr(request, name)) for name in PLACEHOLDERS if name not in values}


def command_line(argv: list[str], request: TrialRequest) -> list[str]:
    """argv with the request's values in place of its placeholders."""
    values = _values(request)
    return [entry.format_map(values) for entry in argv]
