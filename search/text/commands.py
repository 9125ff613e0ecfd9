"""The commands the displays tell a reader to run next: each written in one place, so every display names the same."""

from __future__ import annotations


def confirm_line(study: str, top: int, seeds: int) -> str:
    """Train the `top` schedules by paired mean and uniform on `seeds` fresh paired seeds."""
    return f"prism-search confirm {study} --top {top} --seeds {seeds}"


def resume_line(study: str) -> str:
    """Go on with a stored study: its queued and failed runs, an experiment's next pairs, the rounds."""
    return f"prism-search resume {study}"
