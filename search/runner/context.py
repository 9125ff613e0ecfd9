"""What a command resolved once about the study it drives, handed down whole.

A command that trains (`run`, `resume`, `confirm`) parses its config, opens the storage and the study, builds the
schedule space, makes the trackers and loads the corpus once, at its edge (search.study.create: open_study,
reopen_study), and hands the result to everything below it: the driver, checkpoint keeping, the stale-trial
recovery, the study's pruning, confirmation, experiments and seeding. Nothing below parses the stored config or
rebuilds any of these again (tests/search/study/test_context.py counts it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import optuna

    from search.config import StudyConfig
    from search.families import ScheduleFamily
    from search.tracking import Tracker


@dataclass(frozen=True)
class StudyContext:
    config: StudyConfig  # the study's config with the command's flags on top; its storage URL is the real one
    family: ScheduleFamily  # the schedule space it declares
    study: optuna.Study  # opened once, with the sampler and pruner `config` asks for
    fingerprint: str  # of the corpus, loaded once and checked against the study's
    trackers: tuple[Tracker, ...] = ()  # told every finished trial; made before anything was stored
