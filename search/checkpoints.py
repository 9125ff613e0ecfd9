"""Which trained models a study keeps (`keep_checkpoints = best | all | none`), on the driver's side.

Workers write a trial's checkpoint to `trial_checkpoint_dir` and return its path with the result (stored as
the trial's `checkpoint` user attr, like every result extra); the driver,
for "best", deletes every other trial's directory once a trial finishes. The directory must be on a file
system the driver and the workers share (always true for a local Ray).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import optuna

from search.config import StudyConfig

ATTR_CHECKPOINT = "checkpoint"


def trial_checkpoint_dir(config: StudyConfig, number: int) -> str | None:
    if config.keep_checkpoints == "none":
        return None
    return str(Path(config.checkpoint_dir) / config.name / f"trial-{number:05d}")


def keep_checkpoints(study: optuna.Study, config: StudyConfig) -> None:
    """After a trial was told: when keeping "best", delete every checkpoint but the study's best trial's."""
    from search.study import summarize

    if config.keep_checkpoints != "best":
        return
    best = summarize(study).best_number
    for t in study.get_trials(deepcopy=False):
        path = t.user_attrs.get(ATTR_CHECKPOINT)
        if path and t.number != best and Path(path).is_dir():
            shutil.rmtree(path)
