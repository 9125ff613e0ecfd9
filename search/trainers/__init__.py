"""Trainer kinds: who trains a study's trials (`[trainer]`), one file per kind as search.families."""

from typing import Annotated, Any

from pydantic import Discriminator, Tag

from search.trainers._base import REPORT_ENV, SCHEMA_PATH, TrainerError, TrialRequest, check_event, parse_event
from search.trainers.command import PLACEHOLDERS, CommandSession, CommandTrainer
from search.trainers.prism import PrismTrainer
from search.trainers.python import PythonSession, PythonTrainer, Reporter, TrialStopped


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
    "CommandSession",
    "CommandTrainer",
    "PrismTrainer",
    "PythonSession",
    "PythonTrainer",
    "Reporter",
    "TrainerError",
    "TrainerSection",
    "TrialRequest",
    "TrialStopped",
    "check_event",
    "parse_event",
]
