"""The session of `kind = "python"` (search.trainers.python): the user's function on a thread of the worker.

The function runs in step with the driver: `Reporter.evaluated` returns when the driver asks for the next interval
and raises `TrialStopped` when the trial is pruned. A Python thread cannot be killed: a function silent past
`time_limit_s` fails its trial, but its thread is only asked to stop at its next report.
"""

from __future__ import annotations

import queue
import threading
import traceback

from search.runner.outside._base import Events, OutsideSession, is_marker_line
from search.trainers import ProtocolError, PythonTrainer, Reporter, TrainerError, TrainerTimeout, TrialRequest, TrialStopped
from search.trainers.python import load_function

STOP_WAIT_S = 5.0  # how long a stopped function has to reach its next report and leave


class PythonSession(OutsideSession):
    kind = "python"

    def _launch(self, request: TrialRequest, settings: PythonTrainer) -> Events:
        return _Thread(load_function(settings.function, settings.path), request, settings)

    def _call(self, request: TrialRequest, settings: PythonTrainer) -> str:
        module, name = settings.function.split(":")
        where = f" (path {', '.join(settings.path)})" if settings.path else ""
        return f"from {module} import {name}; {name}(request, reporter){where}"


_DONE = object()


class _Thread(Events):
    def __init__(self, function, request: TrialRequest, settings: PythonTrainer):
        self.settings = settings
        self.reporter = Reporter(settings.function)
        self.error: BaseException | None = None
        self._released = False  # the function waits in `evaluated` for the next call
        self.thread = threading.Thread(target=self._run, args=(function, request), daemon=True, name=f"trainer {request.trial}")
        self.thread.start()

    def _run(self, function, request: TrialRequest) -> None:
        try:
            function(request, self.reporter)
        except TrialStopped:
            pass
        except BaseException as e:
            self.error = e
            self.trace = traceback.format_exc()
        self.reporter._events.put(_DONE)

    def next_event(self) -> dict:
        if self._released:
            self.reporter._go.release()  # the last event was an evaluation: let the function go on
        try:
            event = self.reporter._events.get(timeout=self.settings.time_limit_s)
        except queue.Empty:
            self.close(finished=False)
            raise TrainerTimeout(
                f"{self.settings.function} reported nothing for {self.settings.time_limit_s:g} s (trainer.time_limit_s); its trial failed"
            ) from None
        if event is _DONE:
            if self.error is not None:
                last = [line.strip() for line in self.trace.strip().splitlines() if not is_marker_line(line)][-4:]
                raise TrainerError(f"{self.settings.function} raised {type(self.error).__name__}: {self.error} | {' | '.join(last[:-1])}")
            raise ProtocolError(f"{self.settings.function} returned before reporting its end")
        self._released = event["event"] == "eval"
        return event

    def close(self, finished: bool) -> None:
        self.reporter._stopping = True
        self.reporter._go.release()
        self.thread.join(timeout=None if finished else STOP_WAIT_S)
