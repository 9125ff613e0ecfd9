"""Trainer kinds: who trains a study's trials (`[trainer]`), one file per kind as search.families: each kind's
section, the trial request and the line protocol. The sessions that run them are the runner's (search.runner.outside)."""

from typing import Annotated, Any

from pydantic import Discriminator, Tag

from search.trainers._base import (
    REPORT_ENV,
    SCHEMA_PATH,
    NotNeutral,
    ProtocolError,
    TrainerError,
    TrainerTimeout,
    TrialRequest,
    check_event,
    parse_event,
)
from search.trainers.command import PLACEHOLDERS, CommandTrainer, command_line
from search.trainers.prism import PrismTrainer
from search.trainers.python import PythonTrainer, Reporter, TrialStopped


def _kind(value: Any) -> str:
    """The section's kind; a section that names none is prism's own (the default)."""
    return value.get("kind", "prism") if isinstance(value, dict) else getattr(value, "kind", "prism")


TrainerSection = Annotated[
    Annotated[PrismTrainer, Tag("prism")] | Annotated[CommandTrainer, Tag("command")] | Annotated[PythonTrainer, Tag("python")],
    Discriminator(_kind, custom_error_type="trainer_kind", custom_error_message="kind must be 'prism', 'command' or 'python'"),
]

__all__ = [
    "PLACEHOLDERS",
    "REPORT_ENV",
    "SCHEMA_PATH",
    "CommandTrainer",
    "NotNeutral",
    "PrismTrainer",
    "ProtocolError",
    "PythonTrainer",
    "Reporter",
    "TrainerError",
    "TrainerSection",
    "TrainerTimeout",
    "TrialRequest",
    "TrialStopped",
    "check_event",
    "command_line",
    "parse_event",
]
