"""Creating and opening studies: everything needed to resume is stored at creation.

A study stores its full validated config and its corpus fingerprint (search.storage.records), so `resume NAME`
needs no TOML and refuses a corpus that changed. The uniform baseline is enqueued first, once per
`baseline_seeds`; the first baseline uses the study seed like every search trial, so its gap to any schedule
is a paired comparison (search.analysis.summary).

Opening a study to train it returns its context (search.runner.context.StudyContext): the schedule space its
sampler draws from and its queue is made of is built here, once, and handed on with the study.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import optuna
from optuna.trial import TrialState

from search.attrs import ATTR_CHANGES, ATTR_CONFIG, ATTR_FINGERPRINT, ATTR_STUDY_UID, REFERENCE, ROLE_BASELINE, ROLE_REFERENCE
from search.config import OBJECTIVES, StudyConfig, references_for
from search.errors import PrismSearchError
from search.outputs.urls import mask_url
from search.runner.context import StudyContext
from search.storage.records import enqueue, failed_for_good, run_of, stored_config
from search.study.pruning import make_pruner
from search.study.samplers import make_sampler
from search.text import resume_line

if TYPE_CHECKING:
    from prism import Schedule
    from search.tracking import Tracker


# how an outside trainer's trials are executed: a later `run` of the study may change these (a fixed command, a module
# moved); what its trials measure may not change (search.trainers: its kind, schedules, tolerance, options)
EXECUTION_FIELDS = ("argv", "cwd", "env", "time_limit_s", "grace_s", "function", "path")


def _comparable(config: StudyConfig) -> dict:
    """The parts of a config that identify the experiment and must not change over a study's life (trial count,
    storage, workers, where checkpoints go, which trackers log and how the trainer is executed may)."""
    data = config.model_dump(exclude={"n_trials", "storage", "resources", "keep_checkpoints", "checkpoint_dir", "tracking"})
    data["trainer"] = {k: v for k, v in data["trainer"].items() if k not in EXECUTION_FIELDS}
    return data


def _differences(before: dict, after: dict, prefix: str = "") -> list[str]:
    """The dotted names of the fields that differ between two config dumps."""
    out = []
    for key in sorted(before.keys() | after.keys()):
        a, b = before.get(key), after.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            out += _differences(a, b, f"{prefix}{key}.")
        elif a != b:
            out.append(f"{prefix}{key}")
    return out


def execution_changes(previous: StudyConfig, config: StudyConfig) -> list[str]:
    """How `config` executes the trainer differently from the stored `previous`: "trainer.argv", ..."""
    return [f"trainer.{k}" for k in _differences(previous.trainer.model_dump(), config.trainer.model_dump()) if k in EXECUTION_FIELDS]


def open_study(
    config: StudyConfig,
    storage: optuna.storages.BaseStorage,
    fingerprint: str,
    trackers: Sequence[Tracker] = (),
    note: Callable[[str], None] = lambda text: None,
) -> StudyContext:
    """Create the study (`run`) or reopen it after checking nothing drifted, and queue the baseline and reference
    runs it lacks (callers hold the creation lock); returns its context. `trackers`: the command's
    (search.tracking.make_trackers), made before anything is stored; `note`: where a changed trainer is said."""
    family = config.family
    study = optuna.create_study(
        study_name=config.name,
        storage=storage,
        load_if_exists=True,
        directions=[OBJECTIVES[o].direction for o in config.search.objectives],
        sampler=make_sampler(config, family),
        pruner=make_pruner(config),
    )
    if ATTR_CONFIG in study.user_attrs:
        previous = stored_config(study)
        if differ := _differences(_comparable(previous), _comparable(config)):
            raise PrismSearchError(
                f"study {config.name!r} exists with another {', '.join(differ[:4])}{' ...' if len(differ) > 4 else ''}: what "
                f"its trials measure cannot change; use `{resume_line(config.name)}`, give the study a new name, "
                f"or `prism-search delete {config.name}` first"
            )
        check_same_corpus(study, fingerprint, fix="use a new study name")
        if changed := execution_changes(previous, config):  # kept with the study: its trials ran one way, then another
            log = json.loads(study.user_attrs.get(ATTR_CHANGES, "[]"))
            study.set_user_attr(ATTR_CHANGES, json.dumps([*log, {"from_trial": len(study.trials), "fields": changed}]))
            note(f"study {config.name}: the trainer now runs with a new {', '.join(changed)} from trial {len(study.trials)} on")
        store_config(study, config)  # n_trials, resources and how the trainer is executed may change
    else:  # the config last: it marks the study created, so a driver killed before it leaves a study made anew
        study.set_user_attr(ATTR_FINGERPRINT, fingerprint)
        if ATTR_STUDY_UID not in study.user_attrs:  # kept by a study made anew: never two for one study
            study.set_user_attr(ATTR_STUDY_UID, uuid.uuid4().hex)
        study.set_metric_names(list(config.search.objectives))
        store_config(study, config)
    ctx = StudyContext(config, family, study, fingerprint, tuple(trackers))
    enqueue_missing_baselines(ctx)
    return ctx


def reopen_study(study: optuna.Study, config: StudyConfig, fingerprint: str, trackers: Sequence[Tracker] = (), *, fix: str) -> StudyContext:
    """A stored study, read once (`resume`, `confirm`: search.analysis.stored_study), made ready to train: the
    sampler and pruner `config` asks for, and its corpus checked against the one loaded (`fix`: what to do when
    they differ). Returns its context."""
    check_same_corpus(study, fingerprint, fix=fix)
    family = config.family
    study.sampler, study.pruner = make_sampler(config, family), make_pruner(config)
    return StudyContext(config, family, study, fingerprint, tuple(trackers))


def check_same_corpus(study: optuna.Study, fingerprint: str, *, fix: str) -> None:
    """A study's trials are comparable only on the corpus it was created with (its stored fingerprint)."""
    stored = study.user_attrs.get(ATTR_FINGERPRINT)
    if stored != fingerprint:
        raise PrismSearchError(
            f"study {study.study_name!r} was trained on a corpus with fingerprint {stored}, this one has {fingerprint}; {fix}"
        )


def store_config(study: optuna.Study, config: StudyConfig) -> None:
    """Store the config with its storage URL and tracking URIs masked: a study never keeps credentials. Every
    reader takes the real storage URL from where it opened the study (--storage, or the default); a tracker whose
    URI lost its credentials here is refused until `--track` gives it again (search.tracking.make_trackers)."""
    tracking = {name: mask_url(uri) for name, uri in config.tracking.model_dump().items() if uri is not None}
    masked = config.model_copy(update={"storage": mask_url(config.storage), "tracking": config.tracking.model_copy(update=tracking)})
    study.set_user_attr(ATTR_CONFIG, masked.model_dump_json())


def enqueue_missing_baselines(ctx: StudyContext, retry_failed: bool = False) -> list[str]:
    """Queue each baseline and reference run (one per baseline seed) the study does not hold: all of them for a
    new study, those a driver killed between two enqueues never queued for one reopened. Held: a run with a try
    in any state but FAIL, or one that failed for good (search.storage.records.failed_for_good: its retries spent,
    or a divergence that would only repeat), which `run` leaves failed and `resume` queues once more
    (`retry_failed`). Called under the creation lock (search.storage.creation_lock; SQLite: the driver
    lock), so concurrent drivers queue each run once.
    Returns what was queued."""
    study, config = ctx.study, ctx.config
    trials = study.get_trials(deepcopy=False)
    held = {run_of(t.user_attrs) for t in trials if t.state != TrialState.FAIL} | (set() if retry_failed else set(failed_for_good(trials)))
    seeds = [config.seed + k for k in range(config.search.baseline_seeds)]
    # baselines first (a study's first trials), then each reference at every baseline seed: its gap to uniform
    # is paired on all of them
    runs: list[tuple[str, Schedule, int, dict]] = [(ROLE_BASELINE, config.baseline, seed, {}) for seed in seeds]
    runs += [(ROLE_REFERENCE, ref.schedule, seed, {REFERENCE: ref.name}) for seed in seeds for ref in references_for(config)]
    queued = []
    for role, schedule, seed, extra in runs:
        if (role, str(schedule), seed) not in held:
            enqueue(study, ctx.family, schedule, role=role, seed=seed, **extra)
            queued.append(f"{role} {schedule} seed {seed}")
    return queued
