"""The words of the commands that remove or write out what a study stored: `delete`, `report`, `export`."""

from __future__ import annotations

from pathlib import Path

from search.outputs.urls import mask_url

NOTHING_DELETED = "nothing deleted"


def delete_question(study: str, trials: int, storage: str) -> str:
    return f"delete study {study!r} ({trials} trials) from {mask_url(storage)} and its trial folder?"


def deleted_text(study: str, trials: int, folder: Path | str | None) -> str:
    return f"deleted study {study!r} ({trials} trials)" + (f" and {folder}" if folder else "")


def report_text(path: Path, size: int) -> str:
    """Where the HTML report went (`size`: its bytes), and that it needs no network."""
    return f"wrote {path} ({size / 1e6:.1f} MB); open it in any browser, no network needed"


def unfinished_text(trial: str, state: str) -> str:
    """`export --schedule N` of a trial that never finished training: no measured choice."""
    return f"warning: trial {trial} ended {state}: its schedule was not trained to the end"
