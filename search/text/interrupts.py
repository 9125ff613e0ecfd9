"""What a Ctrl-C or SIGTERM left behind, and how to go on: the last words of an interrupted command (exit 130)."""

from __future__ import annotations

from search.config import StudyConfig, resume_command
from search.outputs.urls import mask_url
from search.text.commands import confirm_line

NOTHING_STORED = "interrupted before anything was stored"  # outside a study's lifecycle: loading the config, preflight


def run_interrupted_text(study: str, stored: StudyConfig | None) -> str:
    """`run` or `resume` stopped; `stored`: the config of the study it had stored (None: nothing was stored)."""
    if stored is not None:
        return f"interrupted: in-flight trials were marked FAIL and queued again; continue with\n  {resume_command(stored)}"
    return f"interrupted before study {study!r} was created: nothing was stored; run it again to start it"


def confirm_interrupted_text(study: str, top: int, seeds: int, storage: str) -> str:
    return (
        f"interrupted: the confirmation runs finished so far are stored; run `{confirm_line(study, top, seeds)} "
        f"--storage {mask_url(storage)}` again to train the rest"
    )
