"""What every trainer kind's `[trainer]` section shares: its settings, the trial request and the line protocol.

A study's `[trainer]` section picks who trains a trial: prism's own loop (`kind = "prism"`), a command line
(`command`) or a Python function (`python`). The last two report through the line protocol (protocol.schema.json
next to this file): a `start` line with the model's parameter count, one `eval` line per evaluation, an `end` line
with the final val loss and tokens/s. The sessions that run them on a worker and turn their events into the worker
protocol live in the runner (search.runner.outside); this package sits below the config, which validates sections
with it, and imports nothing of the runner, torch or Ray.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_PATH = Path(__file__).with_name("protocol.schema.json")
REPORT_ENV = "PRISM_TRAINER_REPORT"  # the file an outside trainer appends its protocol lines to
EXPRESSIBLE = ("any", "monotone", "uniform")  # what per-layer head counts a trainer can build, widest first
_FAMILY_NEEDS = {"free": "any", "ramp": "monotone", "ramp+late": "monotone", "uniform": "uniform"}


class TrainerError(RuntimeError):
    """An outside trainer's trial failed; the one-line message (what the trial stores) names the cause."""


class ProtocolError(TrainerError):
    """A report line that is not JSON, breaks protocol.schema.json, or comes out of order."""


class TrainerTimeout(TrainerError):
    """The trainer said nothing for longer than its time limit; it was stopped."""


class NotNeutral(TrainerError):
    """The trial's model has another parameter count than the uniform baseline's."""


class TrainerSettings(BaseModel):
    """Settings of both outside kinds. Strict: a TOML `"5"` where a number belongs is a mistake, not a 5."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, strict=True)

    schedules: Literal["any", "monotone", "uniform"] = Field(
        "any", description="the schedules the trainer can build: any per-layer list, non-decreasing ones only, or one count"
    )
    param_tolerance: float = Field(
        0.0, ge=0, le=1, description="relative difference of a trial's parameter count from the uniform baseline's allowed (0: exact)"
    )
    time_limit_s: float = Field(3600.0, gt=0, le=10**7, description="the longest a trainer may go without a protocol line")

    def refuses(self, family: str) -> str | None:
        """Why this trainer cannot train the schedules of `family`, or None."""
        needs = _FAMILY_NEEDS[family]
        if EXPRESSIBLE.index(needs) < EXPRESSIBLE.index(self.schedules):
            return (
                f"schedules={self.schedules!r} cannot build the {family!r} family's schedules (they need {needs!r}); "
                f"use space.family = {'uniform' if self.schedules == 'uniform' else 'ramp'!r} or a trainer that takes them"
            )
        return None


@dataclass(frozen=True)
class TrialRequest:
    """What one trial asks of an outside trainer; a `python` trainer gets it as is, a `command` trainer's argv
    template takes its fields as placeholders ({schedule}, {heads}, {seed}, ...)."""

    study: str = field(metadata={"doc": "the study's name"})
    trial: int | None = field(metadata={"doc": "the trial's number; None for the neutrality probe, which belongs to no trial"})
    schedule: str = field(metadata={"doc": "the schedule as HEADSxLAYERS runs, e.g. `2x1,4x2`"})
    heads: tuple[int, ...] = field(metadata={"doc": "one head count per layer, e.g. `(2, 4, 4)`"})
    seed: int = field(metadata={"doc": "seed the initial weights, the data order and the validation batches from it"})
    steps: int = field(metadata={"doc": "optimizer steps to train (`[train] steps`)"})
    tokens: int = field(metadata={"doc": "training tokens: steps x batch_size x block_size"})
    eval_every: int = field(metadata={"doc": "steps between evaluations (`[train] eval_every`)"})
    trial_dir: str = field(metadata={"doc": "this trial's own folder (created): the report file, logs, whatever the trainer saves"})
    device: str = field(metadata={"doc": "`cpu` or `cuda`: what the worker was given (Ray sets CUDA_VISIBLE_DEVICES)"})
    corpus: str = field(metadata={"doc": "the built-in corpus's file, or the study's `data.corpus` as configured"})
    d_model: int = field(metadata={"doc": "`[model] d_model`"})
    n_layer: int = field(metadata={"doc": "`[model] n_layer`: the length of `heads`"})
    block_size: int = field(metadata={"doc": "`[model] block_size`: tokens per training sequence"})
    batch_size: int = field(metadata={"doc": "`[train] batch_size`: sequences per step"})
    options: dict[str, Any] = field(default_factory=dict, metadata={"doc": "`[trainer] options`: anything else the trainer reads"})

    @property
    def report_path(self) -> str:
        return str(Path(self.trial_dir) / "report.jsonl")


@cache
def _validator():
    import jsonschema

    return jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text()))


def _no_constant(text: str) -> float:
    raise ValueError(f"{text} is not a number JSON allows (a diverged run?)")


def parse_event(text: str, where: str) -> dict:
    """One protocol line as a checked event; a ProtocolError naming `where` (the line) and the fix otherwise."""
    try:
        event = json.loads(text, parse_constant=_no_constant)
    except ValueError as e:
        raise ProtocolError(f"{where}: not a JSON object ({e}); write one json.dumps(...) per line") from None
    return check_event(event, where)


def check_event(event: Any, where: str) -> dict:
    """An event (from a line or a python trainer's reporter) checked against protocol.schema.json."""
    errors = sorted(_validator().iter_errors(event), key=lambda e: len(list(e.path)))
    if errors:
        kind = event.get("event") if isinstance(event, dict) else None
        best = next(
            (e for e in _flatten(errors) if kind is None or kind in json.dumps(e.schema.get("properties", {}).get("event", {}))), errors[0]
        )
        field_name = ".".join(str(p) for p in best.path) or "line"
        raise ProtocolError(f"{where}: {field_name}: {best.message} (the protocol: search/trainers/protocol.schema.json)")
    for key in ("val_loss", "train_loss", "tokens_per_s"):
        if key in event and not math.isfinite(event[key]):
            raise ProtocolError(f"{where}: {key} is {event[key]}, not a finite number (a diverged run?)")
    return event


def _flatten(errors):
    """A oneOf failure's own reasons, per branch: the branch whose event name the line used says what is wrong."""
    for e in errors:
        yield from (_flatten(e.context) if e.context else [e])
