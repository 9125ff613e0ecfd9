"""The session of `kind = "command"` (search.trainers.command): one process group per trial.

Each trial runs the section's argv in its cwd, in a process group of its own; its stdout and stderr go to
stdout.log and stderr.log in the trial's folder. Pruning, an interrupt or a trainer silent past `time_limit_s` ends
the whole group: SIGTERM, then SIGKILL after `grace_s`. A guard process watches the worker: if the worker dies (a
Ctrl-C of the driver shuts Ray down, an OOM kill), the guard ends the group the same way, so no trainer outlives
its worker.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

from search.runner.outside._base import Events, OutsideSession, is_marker_line
from search.trainers import REPORT_ENV, CommandTrainer, ProtocolError, TrainerError, TrainerTimeout, TrialRequest, command_line, parse_event

POLL_S = 0.05  # how often a waiting worker looks at the report file
STDERR_TAIL_LINES = 8


class CommandSession(OutsideSession):
    kind = "command"

    def _launch(self, request: TrialRequest, settings: CommandTrainer) -> Events:
        return _Process(command_line(settings.argv, request), request, settings)

    def _call(self, request: TrialRequest, settings: CommandTrainer) -> str:
        return f"cd {shlex.quote(settings.cwd)} && {shlex.join(command_line(settings.argv, request))}"


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
            text = self.stderr_path.read_text(errors="replace")
            lines = [line for line in text.splitlines() if not is_marker_line(line)][-STDERR_TAIL_LINES:]
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
