"""Reference schedules a study enqueues next to the uniform baseline: hand-written or computed for the config.

A `space.references` entry is a schedule (`1x2,2x4`), a named schedule (`wide-early=1x2,2x4`) or the name of a
built-in computed for the model (`paper-ramp`). Names are stored on the trial so `status` can report each one.
"""

from __future__ import annotations

from dataclasses import dataclass

from prism import Schedule
from prism.schedule import paper_ramp


@dataclass(frozen=True)
class Reference:
    name: str
    schedule: Schedule


BUILTIN = {"paper-ramp": paper_ramp}


def parse_reference(text: str, n_layer: int, counts: list[int], baseline_heads: int) -> Reference:
    """`NAME=SCHEDULE`, a built-in name, or a bare schedule (named by its own text). Raises ScheduleError/ValueError."""
    name, sep, body = text.partition("=")
    if sep:
        return Reference(name.strip(), Schedule.parse(body, n_layer))
    if text.strip() in BUILTIN:
        return Reference(text.strip(), BUILTIN[text.strip()](n_layer, counts, baseline_heads))
    if text.strip() and text.strip()[0].isalpha():
        raise ValueError(f"unknown reference name {text!r}; use a schedule, NAME=SCHEDULE or one of {', '.join(BUILTIN)}")
    return Reference(text.strip(), Schedule.parse(text, n_layer))
