"""Which trained models a study keeps (`keep_checkpoints = best | all | none`), on the driver's side.

Workers write a trial's checkpoint to `trial_checkpoint_dir` and return its path with the result (stored as
the trial's `checkpoint` user attr, like every result extra); the driver, for "best", deletes every other
trial's directory once a trial finishes, but keeps the Pareto front's in a multi-objective study and the
paired uniform baseline's (the study seed's): the reference `prism-search audit` and `analyze` compare with.
"best" is the default, so `prism-search audit STUDY:0` (trial 0 is that baseline) works after any study, at the
cost of two or three models on disk.
The directory must be on a file system the driver and the workers share (always true for a local Ray).

A study's models go to CHECKPOINT_DIR/NAME-UID (UID: the id made when the study was created, search.attrs
ATTR_STUDY_UID), and each checkpoint records that id: two storages holding studies of one name never write to one
folder, and every reader refuses a model another study wrote (search.priors.owned_checkpoint). A study made before studies had
an id keeps CHECKPOINT_DIR/NAME, where its stored paths point; its checkpoints record no id, so one overwritten by
another such study of its name cannot be told from its own. A copy of a study (its database copied, or
`optuna.copy_study`) carries its id but not its home: it claims an id of its own the first time a driver runs it
(search.storage.records.claim_uid), so the copy and its original never write into, or clean up, one folder.
A trial that ended FAIL keeps no model (an interrupt can stop a trial after its worker saved one).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from optuna.trial import TrialState

from search.analysis.summary import is_paired_baseline, pareto_trials, ranked
from search.attrs import ATTR_CHECKPOINT
from search.config import StudyConfig
from search.runner.context import StudyContext


def trial_checkpoint_dir(config: StudyConfig, uid: str | None, number: int) -> str | None:
    """Where trial `number` of the study with id `uid` (None: a study made before ids) saves its model."""
    if config.keep_checkpoints == "none":
        return None
    return str(study_folder(config, uid) / f"trial-{number:05d}")


def study_folder(config: StudyConfig, uid: str | None) -> Path:
    """The folder of the study with id `uid` under checkpoint_dir: CHECKPOINT_DIR/NAME-UID (None: NAME)."""
    return Path(config.checkpoint_dir) / (config.name if uid is None else f"{config.name}-{uid}")


def keep_checkpoints(ctx: StudyContext, uid: str | None) -> None:
    """After a trial was told, and when a driver starts: remove the models no reader will use, from this study's
    own folder only (the study with id `uid`; a copy of a study names the original's folders in its trials, never
    its to clean). A trial that ended FAIL (an error, a lost worker, an interrupt: what still needs training is
    queued as a new trial) keeps no model; "best" keeps only the best trial's, the Pareto front's and the paired
    baseline's. Duplicates share their original's directory, so what is kept is decided by path, not by trial.
    A RUNNING trial's folder is being written: it is never touched."""
    study, config = ctx.study, ctx.config
    folder = study_folder(config, uid)
    if config.keep_checkpoints == "none" or not folder.is_dir():
        return
    trials = study.get_trials(deepcopy=False)
    saved = {t.number: Path(path) for t in trials if (path := t.user_attrs.get(ATTR_CHECKPOINT))}
    doomed = {folder / f"trial-{t.number:05d}" for t in trials if t.state == TrialState.FAIL}
    keep: set[Path] = set()
    if config.keep_checkpoints == "best":
        competing = ranked(study, config)
        front = pareto_trials(competing) if len(config.search.objectives) > 1 else []
        keep_numbers = {t.number for t in competing[:1] + front} | {t.number for t in trials if is_paired_baseline(t.user_attrs, config)}
        keep = {saved[n] for n in keep_numbers if n in saved}
        doomed |= set(saved.values())
    for path in doomed - keep:
        if path.parent == folder and path.is_dir():
            shutil.rmtree(path)
