"""The sessions that run an outside trainer (`kind = "command"` or `"python"`, search.trainers) on a worker.

`OutsideSession` turns the protocol events of the user's trainer into the `Started` / `Evaluated` / `Finished`
answers of the worker protocol, so the driver cannot tell an outside trainer from prism's own: pruning,
confirmation, resume, the dashboard and the verdicts work unchanged.

Neutrality: a schedule comparison is fair only at equal parameters. Each worker runs the uniform baseline once for
`search.throughput_probe_steps` steps (the probe) before its first trial; a trial whose reported parameter count
differs from the probe's by more than `param_tolerance` fails at its `start` line with both numbers, and a finished
trial's throughput ratio is its tokens/s over the probe's, both as the trainer measured them on this worker.

Importing this module loads neither torch nor Ray: the sessions import prism's result types when a worker first
uses them.
"""

from __future__ import annotations

import abc
import dataclasses
import json
import math
import os
import shutil
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from search.trainers import NotNeutral, ProtocolError, TrainerError, TrialRequest

CALL_FILE = "call.json"  # in each trial's folder: the command line or function call that ran it, and its request

if TYPE_CHECKING:
    from search.runner.messages import Evaluated, Finished, Started
    from search.runner.worker import TrialSpec


class Events(abc.ABC):
    """One running trainer, read an event at a time."""

    pid: int | None = None  # of the trainer's process, where it has its own

    @abc.abstractmethod
    def next_event(self) -> dict:
        """The next protocol event; a TrainerError when the trainer failed, broke the protocol or went silent."""

    @abc.abstractmethod
    def close(self, finished: bool) -> None:
        """Stop the trainer now (or, `finished`, let it exit after its end line) and free what it held."""


@dataclass
class _Trial:
    spec: TrialSpec
    events: Events
    start: dict
    started: float
    points: list = field(default_factory=list)


@dataclass(frozen=True)
class _Reference:
    """The uniform baseline as this worker's probe measured it."""

    n_params: int
    tokens_per_s: float


class OutsideSession(abc.ABC):
    """The worker protocol (start / advance / stop) over a trainer that reports protocol events: what the driver's
    Ray actors run for `kind = "command"` and `kind = "python"`."""

    kind: ClassVar[str]

    def __init__(self) -> None:
        self.trial: _Trial | None = None
        self._references: dict[tuple, _Reference] = {}

    @abc.abstractmethod
    def _launch(self, request: TrialRequest, settings: Any) -> Events:
        """Start the trainer on `request`."""

    @abc.abstractmethod
    def _call(self, request: TrialRequest, settings: Any) -> str:
        """What runs the trainer on `request`, as a person would type it: kept in the trial's folder and shown."""

    def start(self, spec: TrialSpec) -> Started:
        from search.runner.messages import Started

        self._close(finished=False)  # a trial the driver gave up on (its error, an interrupt) leaves nothing running
        reference = self._reference(spec) if spec.baseline is not None else None
        request = _request(spec, spec.schedule, spec.train.steps, trial_dir=spec.trial_dir or _scratch_dir(spec, "trial"))
        call = self._call(request, spec.trainer)
        record = {"call": call, "request": dataclasses.asdict(request)}  # what ran, beside its stdout.log and stderr.log
        Path(request.trial_dir, CALL_FILE).write_text(json.dumps(record, indent=2) + "\n")
        events = self._launch(request, spec.trainer)
        try:
            start = _expect(events, "start", request.report_path)
            if reference is not None:
                _check_neutral(spec, start["n_params"], reference)
        except BaseException:
            events.close(finished=False)
            raise
        self.trial = _Trial(spec, events, start, time.perf_counter())
        where = {"host": socket.gethostname(), "pid": os.getpid(), "device": spec.train.device, "kernels": f"trainer {self.kind}"}
        where |= {"folder": request.trial_dir, "call": call}
        return Started(where | ({"trainer_pid": events.pid} if events.pid is not None else {}))

    def advance(self) -> Evaluated | Finished:
        from prism import EvalPoint
        from search.runner.messages import Evaluated, Finished

        trial = self._current()
        try:
            event = trial.events.next_event()
            if event["event"] == "eval":
                previous = trial.points[-1].step if trial.points else 0
                if event["step"] <= previous:
                    raise ProtocolError(f"eval at step {event['step']} after one at step {previous}: steps must increase")
                point = EvalPoint(event["step"], event["tokens"], event["val_loss"], event.get("train_loss", math.nan))
                trial.points.append(point)
                return Evaluated(point)
            if event["event"] != "end":
                raise ProtocolError(f"a second {event['event']!r} line; after 'start' come 'eval' lines and one 'end'")
            if event["n_params"] != trial.start["n_params"]:
                raise ProtocolError(f"end line reports {event['n_params']} parameters, the start line {trial.start['n_params']}")
        except BaseException:
            self._close(finished=False)
            raise
        self._close(finished=True)
        return Finished(self._result(trial, event))

    def stop(self) -> Finished:
        """Pruned (or interrupted): the trainer is stopped now, its result is what it reported so far."""
        from search.runner.messages import Finished

        trial = self._current()
        self._close(finished=False)
        return Finished(self._result(trial, None))

    def _current(self) -> _Trial:
        assert self.trial is not None, "start() a trial first"
        return self.trial

    def _close(self, finished: bool) -> None:
        if self.trial is not None:
            trial, self.trial = self.trial, None
            trial.events.close(finished)

    def _reference(self, spec: TrialSpec) -> _Reference:
        """The uniform baseline's parameter count and tokens/s on this worker, from one short run (cached)."""
        assert spec.baseline is not None
        key = (spec.study, spec.baseline, spec.probe_steps)
        if key not in self._references:
            folder = _scratch_dir(spec, "probe")
            request = _request(spec, spec.baseline, spec.probe_steps, trial_dir=folder, probe=True)
            events = self._launch(request, spec.trainer)
            try:
                start = _expect(events, "start", request.report_path)
                while (event := events.next_event())["event"] == "eval":
                    pass
                if event["event"] != "end":
                    raise ProtocolError(f"a second {event['event']!r} line in the baseline probe")
            except TrainerError as e:
                raise TrainerError(f"the uniform baseline's probe run ({spec.baseline}, {spec.probe_steps} steps) failed: {e}") from None
            finally:
                events.close(finished=True)
            shutil.rmtree(folder, ignore_errors=True)
            self._references[key] = _Reference(start["n_params"], event["tokens_per_s"])
        return self._references[key]

    def _result(self, trial: _Trial, end: dict | None):
        from prism import TrainResult
        from search.attrs import THROUGHPUT_RATIO, UNIFORM_TOKENS_PER_S

        spec, points = trial.spec, trial.points
        extra: dict = {}
        if end is not None and spec.baseline is not None:
            reference = self._reference(spec)
            extra = {THROUGHPUT_RATIO: end["tokens_per_s"] / reference.tokens_per_s, UNIFORM_TOKENS_PER_S: reference.tokens_per_s}
        last_step, last_tokens = (points[-1].step, points[-1].tokens) if points else (0, 0)
        return TrainResult(
            schedule=spec.schedule,
            final_val_loss=end["val_loss"] if end else (points[-1].val_loss if points else math.nan),
            curve=list(points),
            tokens_per_s=end["tokens_per_s"] if end else 0.0,  # a stopped trainer never measured its speed
            n_params=trial.start["n_params"],
            flops_per_token=_flops(end or trial.start, trial.start),
            wall_time_s=time.perf_counter() - trial.started,
            steps=end.get("steps", last_step) if end else last_step,
            tokens=end.get("tokens", last_tokens) if end else last_tokens,
            stopped_early=end is None,
            extra=extra,
        )


def is_marker_line(line: str) -> bool:
    """A traceback's caret line (`    ^^^^^`, `~~~^~~`): it points at the line above, and says nothing on one line."""
    return bool(line.strip()) and set(line.strip()) <= set("^~")


def _expect(events: Events, kind: str, where: str) -> dict:
    event = events.next_event()
    if event["event"] != kind:
        raise ProtocolError(f"{where}: the first line is {event['event']!r}; a trainer reports 'start' (with n_params) first")
    return event


def _flops(event: dict, start: dict) -> int | None:
    """The training FLOPs per token the trainer reported (its end line's, else its start line's); None: it did not."""
    flops = event.get("flops_per_token", start.get("flops_per_token"))
    return None if flops is None else int(flops)


def _check_neutral(spec: TrialSpec, n_params: int, reference: _Reference) -> None:
    tolerance = spec.trainer.param_tolerance
    if abs(n_params - reference.n_params) > tolerance * reference.n_params:
        raise NotNeutral(
            f"schedule {spec.schedule} builds {n_params:,} parameters, the uniform baseline {spec.baseline} "
            f"{reference.n_params:,} (param_tolerance {tolerance:g}): not a fair comparison; make the head count change no "
            "parameter's shape, or raise trainer.param_tolerance"
        )


def _scratch_dir(spec: TrialSpec, what: str) -> str:
    base = Path(spec.trial_dir).parent if spec.trial_dir else Path.cwd()
    return str(base / f"{what}-{socket.gethostname()}-{os.getpid()}")


def corpus_file(corpus: str) -> str:
    """A built-in corpus as the file it ships in (a trainer reads files, not names); anything else as configured."""
    from prism.data import CORPORA_DIR

    return str(CORPORA_DIR / "shakespeare_milton.txt.xz") if corpus == "shakespeare" else corpus


def _request(spec: TrialSpec, schedule: str, steps: int, trial_dir: str, probe: bool = False) -> TrialRequest:
    """The request of spec's trial, or (`probe`) of the neutrality probe: the baseline, one evaluation at its end."""
    from prism import Schedule

    Path(trial_dir).mkdir(parents=True, exist_ok=True)
    heads = Schedule.parse(schedule).heads
    return TrialRequest(
        study=spec.study,
        trial=None if probe else spec.number,
        schedule=schedule,
        heads=heads,
        seed=spec.train.seed,
        steps=steps,
        tokens=steps * spec.train.batch_size * spec.model.block_size,
        eval_every=steps if probe else spec.train.eval_every,
        trial_dir=trial_dir,
        device=spec.train.device,
        corpus=corpus_file(spec.corpus),
        d_model=spec.model.d_model,
        n_layer=spec.model.n_layer,
        block_size=spec.model.block_size,
        batch_size=spec.train.batch_size,
        options=dict(getattr(spec.trainer, "options", {})),
    )
