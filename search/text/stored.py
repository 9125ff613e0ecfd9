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


def empty_storage_text(default: str) -> str:
    """`--storage ""` (an unset shell variable) would read or write the default database unnoticed."""
    return f"--storage is empty; name a database URL such as {default}, or leave the option out"


def nobody_to_ask_text(study: str) -> str:
    """`delete` with no terminal to ask on (a script, a pipe) and no --yes."""
    return f"delete {study}: nobody to ask on standard input (fix: pass --yes to delete without asking)"


def unknown_format_text(fmt: str) -> str:
    """`export --format` of a format that writes no whole study."""
    return f"--format {fmt!r} is not supported; use csv or json (hf and nanogpt with --schedule)"


def stdout_unwritable_text(reason: str | None) -> str:
    """`export > /dev/full`, a closed pipe: `reason` is the OS's."""
    return f"export: cannot write to standard output ({reason}) (fix: redirect it to a writable place)"


def unfinished_text(trial: str, state: str) -> str:
    """`export --schedule N` of a trial that never finished training: no measured choice."""
    return f"warning: trial {trial} ended {state}: its schedule was not trained to the end"
