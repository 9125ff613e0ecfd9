"""`kind = "command"`: the user's own training script, one process (group) per trial.

    [trainer]
    kind = "command"
    argv = ["{python}", "train.py", "--heads", "{heads}", "--seed", "{seed}", "--steps", "{steps}"]
    cwd = "path/to/repo"

Each trial runs argv (placeholders filled in: PLACEHOLDERS) in cwd, in a process group of its own, with
$PRISM_TRAINER_REPORT naming the file it appends its protocol lines to (search.trainers._base); its stdout and
stderr go to stdout.log and stderr.log in the trial's folder. Pruning, an interrupt or a trainer silent past
`time_limit_s` ends the whole group: SIGTERM, then SIGKILL after `grace_s`. A guard process watches the worker: if
the worker dies (a Ctrl-C of the driver shuts Ray down, an OOM kill), the guard ends the group the same way, so no
trainer outlives its worker.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import string
import subprocess
import sys
import time
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from search.trainers._base import (
    REPORT_ENV,
    Events,
    OutsideSession,
    ProtocolError,
    TrainerError,
    TrainerSettings,
    TrainerTimeout,
    TrialRequest,
    parse_event,
)

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
POLL_S = 0.05  # how often a waiting worker looks at the report file
STDERR_TAIL_LINES = 8


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

    @staticmethod
    def session_class() -> type:
        return CommandSession


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


class CommandSession(OutsideSession):
    kind = "command"

    def _launch(self, request: TrialRequest, settings: CommandTrainer) -> Events:
        return _Process(command_line(settings.argv, request), request, settings)


# the guard: ends the trainer's process group once the worker that started it is gone (its parent changes)
_GUARD = """
import os, signal, sys, time
parent, group, grace = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
def alive():
    try:
        os.killpg(group, 0)
        return True
    except ProcessLookupError:
        return False
while alive():
    if os.getppid() != parent:
        os.killpg(group, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        if alive():
            os.killpg(group, signal.SIGKILL)
        break
    time.sleep(0.2)
"""


class _Process(Events):
    """One trainer process group, its report file read a line at a time."""

    def __init__(self, argv: list[str], request: TrialRequest, settings: CommandTrainer):
        self.settings, self.report = settings, Path(request.report_path)
        folder = Path(request.trial_dir)
        self.report.write_text("")  # a retried trial starts a fresh report
        self.stderr_path = folder / "stderr.log"
        env = os.environ | settings.env | {REPORT_ENV: str(self.report), "PRISM_TRIAL_DIR": str(folder)}
        with open(folder / "stdout.log", "wb") as out, open(self.stderr_path, "wb") as err:
            try:
                self.proc = subprocess.Popen(
                    argv, cwd=settings.cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True
                )
            except OSError as e:
                raise TrainerError(f"cannot start the trainer {argv[0]!r}: {e.strerror or e}") from None
        self.pid = self.proc.pid
        self.guard = subprocess.Popen(
            [sys.executable, "-c", _GUARD, str(os.getpid()), str(self.pid), str(settings.grace_s)], start_new_session=True
        )
        self._file = open(self.report, encoding="utf-8")  # noqa: SIM115 (read for the trainer's whole run)
        self._buffer, self._line_number = "", 0

    def next_event(self) -> dict:
        deadline = time.monotonic() + self.settings.time_limit_s
        while True:
            self._buffer += self._file.read()
            if "\n" in self._buffer:
                line, self._buffer = self._buffer.split("\n", 1)
                return self._parse(line)
            code = self.proc.poll()
            if code is not None:
                self._buffer += self._file.read()
                if self._buffer.strip():  # a last line without its newline
                    line, self._buffer = self._buffer, ""
                    return self._parse(line)
                raise self._exited(code)
            if time.monotonic() > deadline:
                self.close(finished=False)
                raise TrainerTimeout(
                    f"the trainer wrote no protocol line for {self.settings.time_limit_s:g} s (trainer.time_limit_s) and was stopped; "
                    f"stderr: {self._stderr_tail()}"
                )
            time.sleep(POLL_S)

    def _parse(self, line: str) -> dict:
        self._line_number += 1
        if not line.strip():
            return self.next_event()
        return parse_event(line, f"{self.report} line {self._line_number}")

    def _exited(self, code: int) -> TrainerError:
        if code == 0:
            return ProtocolError(f"the trainer exited (code 0) before its 'end' line ({self.report}); stderr: {self._stderr_tail()}")
        how = f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with code {code}"
        return TrainerError(f"the trainer {how}; stderr: {self._stderr_tail()}")

    def _stderr_tail(self) -> str:
        """The last lines the trainer wrote to stderr, on one line (a trial's error is one line)."""
        try:
            lines = self.stderr_path.read_text(errors="replace").splitlines()[-STDERR_TAIL_LINES:]
        except OSError:
            return "(unreadable)"
        return " | ".join(line.strip() for line in lines if line.strip())[-1000:] or "(empty)"

    def close(self, finished: bool) -> None:
        if finished:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=self.settings.grace_s)
        _end_group(self.proc, self.settings.grace_s)
        self.guard.kill()
        self.guard.wait()
        self._file.close()


def _end_group(proc: subprocess.Popen, grace_s: float) -> None:
    """SIGTERM to the trainer's whole group, SIGKILL to whatever is left after `grace_s`, and the leader reaped."""
    group = proc.pid
    try:
        os.killpg(group, signal.SIGTERM)
    except ProcessLookupError:
        proc.wait()
        return
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)  # children that outlived the leader too
    proc.wait()
