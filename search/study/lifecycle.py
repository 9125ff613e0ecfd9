"""A study's life: open or resume it, recover what a lost driver left, seed it with a prior, drive its trials,
confirm its best. The CLI parses and prints; everything between a config and a summary happens here.

Priors in a study: seeding enqueues the prior's schedules right after whatever the study already queued
(baselines, references), as ordinary prunable search trials tagged `source=prior`. With `search.prior_strength`
> 0 the next `search.n_startup_trials` proposals are drawn near them (search.study.samplers.PriorSampler). The
study keeps what it was seeded with (user attrs ATTR_PRIOR and ATTR_AUDIT, JSON) so `resume` narrows the same
way and the dashboard can plot the profile and zones against each trial's schedule.

Ray, the driver and torch load inside the functions that train: importing this module stays light.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import optuna
from optuna.trial import TrialState
from rich.console import Console

from prism import Schedule
from search.analysis.budget import budget, exhausted
from search.analysis.racing import Racing
from search.analysis.sequential import plan_of
from search.analysis.summary import ConfirmationRow, paired_baseline
from search.attrs import ATTR_AUDIT, ATTR_CHECKPOINT, ATTR_PRIOR, PRIOR_RANK, ROLE_SEARCH, SCHEDULE, SEED, SOURCE, SOURCE_PRIOR
from search.config import StudyConfig, family_for
from search.errors import AuditError, ConfigError, PriorError
from search.runner.cluster import check_cluster
from search.runner.corpus import corpus_fingerprint
from search.signals import sigterm_as_ctrl_c
from search.storage import creation_lock, driver_lock, open_storage, storage_url
from search.storage.records import enqueue, stored_config
from search.study.confirmation import run_confirmation, top_schedules
from search.study.create import check_same_corpus, enqueue_missing_baselines, load_study, open_study, store_config
from search.study.experiment import current, run_experiment
from search.study.pruning import make_stopping
from search.study.samplers import narrowed, reachable_target


@dataclass(frozen=True)
class AutoPrior:
    """`run --prior auto`: train the baselines keeping their checkpoints, audit the paired one, seed from it."""


@dataclass(frozen=True)
class PriorFile:
    """`run --prior PRIOR.json`: a prior file (`prism-search prior`), read and checked against the study."""

    prior: dict  # {"n_layer", "schedules": [{"schedule", "rank", ...}], ...} (search.priors.prior_file)


PriorChoice = AutoPrior | PriorFile | None  # None: no prior


def parse_prior(flag: str | None, config: StudyConfig) -> PriorChoice:
    """What `--prior` asks for; a file is read and checked here, at the command's edge, before anything is stored."""
    if flag is None:
        return None
    if flag == "auto":
        return AutoPrior()
    from search.priors import read_prior  # torch

    return PriorFile(read_prior(flag, config))


def execute(
    config: StudyConfig,
    address: str | None,
    *,
    resume: bool,
    console: Console,
    prior: PriorChoice = None,
    retry_baselines: bool = False,
) -> tuple[optuna.Study, float | None]:
    """Shared by `run` and `resume`: open storage and study, recover stale trials, seed, drive trials.
    `retry_baselines` (resume): queue the baseline and reference runs that failed for good once more.

    Returns the study and the wall time of the trials driven (None: the study had reached its target). A Ctrl-C
    or SIGTERM arrives as KeyboardInterrupt after in-flight trials were queued again."""
    from search.tracking import make_trackers

    if prior is not None and config.experiment is not None:
        raise ConfigError("--prior: an experiment trains only its pre-registered pairs (fix: drop --prior)")
    check_cluster(address, config.storage)
    make_trackers(config.tracking)  # a missing tracker library fails here, before any compute
    fingerprint = corpus_fingerprint(config)
    with driver_lock(config.storage):
        return _drive(config, address, fingerprint, resume=resume, console=console, prior=prior, retry_baselines=retry_baselines)


def _drive(
    config: StudyConfig,
    address: str | None,
    fingerprint: str,
    *,
    resume: bool,
    console: Console,
    prior: PriorChoice,
    retry_baselines: bool,
) -> tuple[optuna.Study, float | None]:
    """execute's work, under the driver lock: from opening the study (and queueing what it lacks) to its target."""
    from search.progress import Progress
    from search.runner.driver import Driver, connect_ray, requeue_stale_trials
    from search.runner.undelivered import deliver_undelivered

    with creation_lock(config.storage):
        storage = open_storage(config.storage)
        if resume:
            study = load_study(config.name, storage)
            check_same_corpus(study, fingerprint, fix="start a new study")
            store_config(study, config)  # a new --n-trials target, stored as `run` stores it
            missing = enqueue_missing_baselines(study, config, retry_failed=retry_baselines)
            if missing:  # a driver killed while creating the study queued only some of them, or --retry-baselines
                console.print(f"queued the baseline runs the study lacked: {', '.join(missing)}", highlight=False)
        else:
            study = open_study(config, storage, fingerprint)
    delivered = deliver_undelivered(study)
    if delivered:
        console.print(f"stored results kept while the database was down: trials {delivered}")
    requeued = requeue_stale_trials(study)
    if requeued:
        console.print(f"recovered trials left running by a lost driver: {requeued} (queued again)")
    done = budget(study.get_trials(deepcopy=False), config.seed)
    plan = plan_of(config)
    if plan is not None and (decided := current(study, config, plan)).next_seed is None:
        console.print(f"experiment {config.name} has ended: {decided.text()}; nothing to run", soft_wrap=True, highlight=False)
        return study, None
    full = exhausted(done, family_for(config), config.n_trials)
    if plan is None and (done.searched >= config.n_trials or full):
        why = f" ({full})" if full and done.searched < config.n_trials else ""
        console.print(
            f"study {config.name} already has {done.searched}/{config.n_trials} trained trials{why}; nothing to run",
            soft_wrap=True,
            highlight=False,
        )
        return study, None
    workers = config.resources.workers
    if dashboard := connect_ray(address, num_cpus=workers * config.resources.cpus_per_trial):
        console.print(f"Ray cluster dashboard: http://{dashboard}", highlight=False)
    progress = Progress(config.name, config.n_trials, done.searched, console=console)
    started = time.monotonic()
    try:
        with sigterm_as_ctrl_c():
            if plan is not None:
                run_experiment(study, config, plan, fingerprint, progress)
                return study, time.monotonic() - started
            _seed_with_prior(study, config, prior, fingerprint, progress)
            racing = Racing(config) if config.search.racing else None
            driver = Driver(study, config, fingerprint, progress, stopping=make_stopping(study, config), racing=racing)
            # the driver counts every trained trial: the confirmation runs held so far sit on top of n_trials
            driver.run(reachable_target(study, config.n_trials + done.confirmation), workers)
    finally:
        progress.close()
    return study, time.monotonic() - started


def confirm(
    study: optuna.Study, top: int, seeds: int, workers: int | None, address: str | None, console: Console, track: list[str] | None = None
) -> list[ConfirmationRow]:
    """Re-train the `top` schedules and uniform on fresh seeds (search.study.confirmation); returns the confirmation rows.
    `track`: --track flags on top of the stored trackers (a stored URI keeps no credentials: search.urls)."""
    from search.progress import Progress
    from search.runner.driver import connect_ray

    config = stored_config(study)
    if track:
        config = config.model_copy(update={"tracking": config.tracking.with_flags(track)})
    planned = (len(top_schedules(study, top)) + 1) * seeds  # fails fast when there is nothing to confirm
    fingerprint = corpus_fingerprint(config)
    check_same_corpus(study, fingerprint, fix="confirm where the study's corpus is")
    n_workers = workers or config.resources.workers
    with driver_lock(storage_url(study)):
        connect_ray(address, num_cpus=n_workers * config.resources.cpus_per_trial)
        done = budget(study.get_trials(deepcopy=False), config.seed).trained
        progress = Progress(study.study_name, done + planned, done, console=console)
        try:
            with sigterm_as_ctrl_c():
                return run_confirmation(study, config, fingerprint, top, seeds, n_workers, progress)
        finally:
            progress.close()


def _seed_with_prior(study: optuna.Study, config: StudyConfig, prior: PriorChoice, fingerprint: str, progress) -> None:
    """`--prior auto`: train the baselines keeping checkpoints, audit the paired one, seed; a prior file: seed.
    A study seeded before (also on resume) gets its narrowing sampler back."""
    from search.runner.driver import Driver

    match prior:
        case AutoPrior() if not is_seeded(study):
            baselines = Driver(study, keeping_checkpoints(config), fingerprint, progress, stopping=make_stopping(study, config))
            baselines.run(config.search.baseline_seeds, config.resources.workers)
            audited = prior_from_baseline(study, config)
            progress.note(f"prior from the baseline's geometry: {', '.join(e['schedule'] for e in audited['schedules'])}")
        case PriorFile(ranked):
            added = seed_study(study, config, ranked)
            progress.note(f"prior schedules queued: {', '.join(added) or 'none new'}")
    narrow_sampler(study, config)


# -- priors in a study -------------------------------------------------------------------------------------
def is_seeded(study: optuna.Study) -> bool:
    return ATTR_PRIOR in study.user_attrs


def seed_study(study: optuna.Study, config: StudyConfig, prior: dict, profile: dict | None = None) -> list[str]:
    """Enqueue the prior's schedules (once per study) and store prior and profile; returns those enqueued."""
    if is_seeded(study):
        return []
    family = family_for(config)
    trials = study.get_trials(deepcopy=False)
    queued = {
        t.user_attrs.get(SCHEDULE)
        for t in trials
        if t.user_attrs.get(SEED, config.seed) == config.seed and t.state in (TrialState.WAITING, TrialState.RUNNING, TrialState.COMPLETE)
    }
    added = []
    for entry in prior["schedules"]:
        if entry["schedule"] in queued:
            continue  # the baseline or a reference already measures it
        origin = {SOURCE: SOURCE_PRIOR, PRIOR_RANK: entry["rank"]}
        enqueue(study, family, Schedule.parse(entry["schedule"]), role=ROLE_SEARCH, seed=config.seed, **origin)
        queued.add(entry["schedule"])
        added.append(entry["schedule"])
    narrow_until = len(study.get_trials(deepcopy=False)) + config.search.n_startup_trials  # trial numbers
    study.set_user_attr(ATTR_PRIOR, json.dumps(prior | {"narrow_until": narrow_until, "strength": config.search.prior_strength}))
    if profile is not None:
        study.set_user_attr(ATTR_AUDIT, json.dumps(profile))
    return added


def narrow_sampler(study: optuna.Study, config: StudyConfig) -> None:
    """Narrow the study's sampler with its prior (search.study.samplers.narrowed) when the study was seeded with one."""
    if not is_seeded(study):
        return
    prior = json.loads(study.user_attrs[ATTR_PRIOR])
    family = family_for(config)
    anchors = [
        family.params_for(Schedule.parse(e["schedule"])) for e in prior["schedules"] if family.contains(Schedule.parse(e["schedule"]))
    ]
    study.sampler = narrowed(study.sampler, anchors, prior["strength"], prior["narrow_until"], config.seed)


def keeping_checkpoints(config: StudyConfig) -> StudyConfig:
    """The config the baselines of `--prior auto` run under: every trial keeps its checkpoint (the baseline's is
    audited). Later trials follow the study's own keep_checkpoints; with "best" the baseline's goes once beaten,
    its profile stays in the study (ATTR_AUDIT)."""
    return config.model_copy(update={"keep_checkpoints": "all"})  # checkpoint_dir is absolute already (StudyConfig._absolute)


def prior_from_baseline(study: optuna.Study, config: StudyConfig, top_k: int = 4) -> dict:
    """Audit the paired baseline's checkpoint, map the profile, seed the study; returns the prior."""
    from search.priors import audit_model, load_source, make_prior  # torch

    trial = paired_baseline(study.get_trials(deepcopy=False), config)
    if trial is None:
        raise PriorError(f"study {config.name!r} has no finished baseline trial at seed {config.seed}; --prior auto needs one")
    path = trial.user_attrs.get(ATTR_CHECKPOINT)
    if not path:
        raise AuditError(
            f"baseline trial {trial.number} of {config.name!r} kept no checkpoint; --prior auto needs "
            "the baseline trained by the same `run --prior auto`"
        )
    model, _ = load_source(str(path), config.storage)
    profile = audit_model(model, source=f"{config.name}:{trial.number}") | {"checkpoint": str(path)}
    prior = make_prior(profile, config, top_k)
    seed_study(study, config, prior, profile)
    return prior
