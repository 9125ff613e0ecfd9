"""The words of `schedules`: the size of a study's schedule space."""

from __future__ import annotations

from search.config import StudyConfig


def space_text(config: StudyConfig) -> str:
    family = config.family
    return f"{family.name}: {family.size():,} schedules ({config.model.n_layer} layers, head counts {family.counts})"
