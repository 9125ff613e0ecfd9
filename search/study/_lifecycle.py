"""A study's life once `Study` has resolved its context: open or resume it, recover what a lost driver left, seed it
with a prior, drive its trials, confirm its best. Private to the study package: `Study` is the way in, and it alone
turns Ctrl-C and SIGTERM into `StudyInterrupted`.

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
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import optuna
from optuna.trial import TrialState

from prism import Schedule
from search.analysis.budget import budget
from search.analysis.sequential import plan_of
from search.analysis.summary import ConfirmationRow, paired_baseline
from search.attrs import ATTR_AUDIT, ATTR_CHECKPOINT, ATTR_PRIOR, PRIOR_RANK, ROLE_SEARCH, SCHEDULE, SEED, SOURCE, SOURCE_PRIOR
from search.config import StudyConfig
from search.errors import AuditError, ConfigError, PriorError
from search.runner.context import StudyContext
from search.runner.progress import StudyProgress
from search.storage import creation_lock, open_storage
from search.storage.records import enqueue
from search.study.confirmation import collect, plan_confirmation, train_queued
from search.study.create import enqueue_missing_baselines, open_study, reopen_study, store_config
from search.study.experiment import current, run_experiment
from search.study.policy import StopWhenExhausted, first_stop, search_policies
from search.study.pruning import make_stopping
from search.study.rounds import frozen_rounds, rounds_left, run_rounds
from search.study.samplers import narrowed, reachable_target
from search.text import corpus_text, search_after_rounds_text, state_text

if TYPE_CHECKING:
    from prism.data import CorpusFacts
    from search.priors import Prior, Profile  # loads torch: only the commands that train read a prior
    from search.tracking import Tracker


@dataclass(frozen=True)
class AutoPrior:
    """`run --prior auto`: train the baselines keeping their checkpoints, audit the paired one, seed from it."""


@dataclass(frozen=True)
class PriorFile:
    """`run --prior PRIOR.json`: a prior file (`prism-search prior`), read and checked against the study."""

    prior: Prior


PriorChoice = AutoPrior | PriorFile | None  # None: no prior


def parse_prior(flag: str | None, config: StudyConfig) -> PriorChoice:
    """What `--prior` asks for; a file is read and checked here, at the command's edge, before anything is stored."""
    if flag is None:
        return None
    if flag == "auto":
        return AutoPrior()
    from search.priors import read_prior  # torch

    return PriorFile(read_prior(flag, config))


def open_to_run(
    config: StudyConfig,
    fingerprint: str,
    trackers: Sequence[Tracker],
    progress: StudyProgress,
    *,
    resumed: optuna.Study | None,
) -> StudyContext:
    """`run` (`resumed` None: create the study, or continue one whose config matches) or `resume` (the stored study,
    with the command's new target stored, and its baseline runs that failed for good queued again): the study's
    context, its baseline runs queued. Called under the driver lock; takes the creation lock."""
    with creation_lock(config.storage):
        if resumed is None:
            return open_study(config, open_storage(config.storage), fingerprint, trackers, note=progress.note)
        ctx = reopen_study(resumed, config, fingerprint, trackers, fix="start a new study")
        store_config(ctx.study, config)  # a new --n-trials target, stored as `run` stores it
        missing = enqueue_missing_baselines(ctx, retry_failed=True)
        if missing:  # a driver killed while creating the study queued only some, or they failed for good
            progress.note(f"queued the baseline runs the study lacked: {', '.join(missing)}")
        return ctx


def drive(ctx: StudyContext, address: str | None, *, progress: StudyProgress, prior: PriorChoice, corpus: CorpusFacts) -> float | None:
    """`run` and `resume` once the study is open (under the driver lock): recover what a lost driver left, seed,
    drive trials to the study's target, saying first what the `corpus` holds. Returns the wall time of the trials
    driven (None: nothing to run)."""
    from search.runner.driver import Driver, requeue_stale_trials
    from search.runner.undelivered import deliver_undelivered

    study, config = ctx.study, ctx.config
    delivered = deliver_undelivered(study)
    if delivered:
        progress.note(f"stored results kept while the database was down: trials {delivered}")
    requeued = requeue_stale_trials(ctx)
    if requeued:
        progress.note(f"recovered trials left running by a lost driver: {requeued} (queued again)")
    done = budget(study.get_trials(deepcopy=False), config.seed)
    plan = plan_of(config)
    if plan is not None and (decided := current(study, config, plan)).next_seed is None:
        progress.note(f"experiment {config.name} has ended: {state_text(decided)}; nothing to run")
        return None
    policies = search_policies(config, ctx.family)
    full = first_stop(policies, done)
    searched = plan is None and (done.searched >= config.n_trials or bool(full))
    if searched and prior is not None and done.searched >= config.n_trials:  # asked to seed, but no seeded schedule would train
        n = len(prior.prior.schedules) if isinstance(prior, PriorFile) else None
        more = "above it" if n is None else f"{done.searched + n} to train its {n}"
        raise ConfigError(
            f"--prior: study {config.name!r} already has {done.searched}/{config.n_trials} trained trials, so none of the "
            f"prior's schedules would train (fix: --n-trials {more})"
        )
    if searched and not rounds_left(study, config):
        why = f" ({full.text()})" if full and done.searched < config.n_trials else ""
        progress.note(f"study {config.name} already has {done.searched}/{config.n_trials} trained trials{why}; nothing to run")
        return None
    progress.note(corpus_text(corpus))
    _join_ray(address, config, progress)
    progress.begin(config.name, config.n_trials + done.confirmation, done.trained)  # confirmation runs held count on both sides
    started = time.monotonic()
    try:
        if plan is not None:
            run_experiment(ctx, plan, progress)
        else:
            if not searched:
                if (frozen := frozen_rounds(study, config)) is not None:
                    progress.note(search_after_rounds_text(frozen))
                _seed_with_prior(ctx, prior, progress)
                driver = Driver(ctx, progress, stopping=make_stopping(ctx), policies=policies)
                # the driver counts every trained trial: the confirmation runs held so far sit on top of n_trials
                driver.run(reachable_target(study, config.n_trials + done.confirmation), config.resources.workers)
            if rounds_left(study, config):
                run_rounds(ctx, progress)
    finally:
        progress.close()
    return time.monotonic() - started


def confirm(
    ctx: StudyContext, top: int, seeds: int, address: str | None, progress: StudyProgress, corpus: CorpusFacts
) -> list[ConfirmationRow]:
    """`confirm` once the study is open (under the driver lock): re-train the `top` schedules and uniform on fresh
    seeds (search.study.confirmation), saying first what the `corpus` holds; returns the confirmation rows. Ray
    starts only when a run is left to train: a confirmation an earlier one covers is read from the study."""
    from search.runner.driver import requeue_stale_trials

    requeue_stale_trials(ctx)  # runs of a stopped `confirm` (or run) whose driver died are queued again
    plan_confirmation(ctx, top, seeds)  # fails fast when there is nothing to confirm
    progress.note(corpus_text(corpus))
    # a dead driver's running runs whose heartbeat is not stale yet are queued again while this one trains: they count
    done = budget(ctx.study.get_trials(deepcopy=False), ctx.config.seed)
    if done.running + done.waiting:
        _join_ray(address, ctx.config, progress)
        progress.begin(ctx.study.study_name, done.trained + done.running + done.waiting, done.trained)
        try:
            train_queued(ctx, progress)
        finally:
            progress.close()
    return collect(ctx.study)


def _join_ray(address: str | None, config: StudyConfig, progress: StudyProgress) -> None:
    """Start a local Ray sized for the run's workers, or join the cluster at `address`: its dashboard is printed,
    and, when no node could hold one trial now, a note, then a bounded wait for one (search.runner.cluster)."""
    from search.runner.cluster import connect_ray, wait_for_a_fitting_node

    resources = config.resources
    if dashboard := connect_ray(address, num_cpus=resources.workers * resources.cpus_per_trial):
        progress.note(f"Ray cluster dashboard: http://{dashboard}")
    if address:
        wait_for_a_fitting_node(resources.cpus_per_trial, resources.gpus_per_trial, progress.note)


def _seed_with_prior(ctx: StudyContext, prior: PriorChoice, progress: StudyProgress) -> None:
    """`--prior auto`: train the baselines keeping checkpoints, audit the paired one, seed; a prior file: seed.
    A study seeded before (also on resume) gets its narrowing sampler back."""
    from search.runner.driver import Driver

    config = ctx.config
    match prior:
        case AutoPrior() if not is_seeded(ctx.study):
            stop_rule = [StopWhenExhausted(ctx.family, config.n_trials)]
            baselines = Driver(replace(ctx, config=keeping_checkpoints(config)), progress, stopping=make_stopping(ctx), policies=stop_rule)
            baselines.run(config.search.baseline_seeds, config.resources.workers)
            audited = prior_from_baseline(ctx)
            progress.note(f"prior from the baseline's geometry: {', '.join(e.schedule for e in audited.schedules)}")
        case PriorFile(ranked):
            added = seed_study(ctx, ranked)
            progress.note(f"prior schedules queued: {', '.join(added) or 'none new'}")
    narrow_sampler(ctx)


# -- priors in a study -------------------------------------------------------------------------------------
def is_seeded(study: optuna.Study) -> bool:
    return ATTR_PRIOR in study.user_attrs


def seed_study(ctx: StudyContext, prior: Prior, profile: Profile | None = None) -> list[str]:
    """Enqueue the prior's schedules (once per study) and store prior and profile; returns those enqueued."""
    study, config = ctx.study, ctx.config
    if is_seeded(study):
        return []
    trials = study.get_trials(deepcopy=False)
    queued = {
        t.user_attrs.get(SCHEDULE)
        for t in trials
        if t.user_attrs.get(SEED, config.seed) == config.seed and t.state in (TrialState.WAITING, TrialState.RUNNING, TrialState.COMPLETE)
    }
    added = []
    for entry in prior.schedules:
        if entry.schedule in queued:
            continue  # the baseline or a reference already measures it
        origin = {SOURCE: SOURCE_PRIOR, PRIOR_RANK: entry.rank}
        enqueue(study, ctx.family, Schedule.parse(entry.schedule), role=ROLE_SEARCH, seed=config.seed, **origin)
        queued.add(entry.schedule)
        added.append(entry.schedule)
    narrow_until = len(study.get_trials(deepcopy=False)) + config.search.n_startup_trials  # trial numbers
    seeded = replace(prior, narrow_until=narrow_until, strength=config.search.prior_strength)
    study.set_user_attr(ATTR_PRIOR, json.dumps(seeded.to_dict()))
    if profile is not None:
        study.set_user_attr(ATTR_AUDIT, json.dumps(profile.to_dict()))
    return added


def narrow_sampler(ctx: StudyContext) -> None:
    """Narrow the study's sampler with its prior (search.study.samplers.narrowed) when the study was seeded with one."""
    study, family = ctx.study, ctx.family
    if not is_seeded(study):
        return
    from search.priors import Prior

    prior = Prior.of(json.loads(study.user_attrs[ATTR_PRIOR]), f"study {study.study_name!r}'s stored prior")
    anchors = [family.params_for(Schedule.parse(e.schedule)) for e in prior.schedules if family.contains(Schedule.parse(e.schedule))]
    assert prior.strength is not None and prior.narrow_until is not None  # a seeded study stores both (seed_study)
    study.sampler = narrowed(study.sampler, anchors, prior.strength, prior.narrow_until, ctx.config.seed)


def keeping_checkpoints(config: StudyConfig) -> StudyConfig:
    """The config the baselines of `--prior auto` run under: every trial keeps its checkpoint (the baseline's is
    audited). Later trials follow the study's own keep_checkpoints; with "best" the baseline's goes once beaten,
    its profile stays in the study (ATTR_AUDIT)."""
    return config.model_copy(update={"keep_checkpoints": "all"})  # checkpoint_dir is absolute already (StudyConfig._absolute)


def prior_from_baseline(ctx: StudyContext, top_k: int = 4) -> Prior:
    """Audit the paired baseline's checkpoint, map the profile, seed the study; returns the prior."""
    from search.priors import audit_model, load_source, make_prior, owned_checkpoint  # torch

    study, config = ctx.study, ctx.config
    trial = paired_baseline(study.get_trials(deepcopy=False), config)
    if trial is None:
        raise PriorError(f"study {config.name!r} has no finished baseline trial at seed {config.seed}; --prior auto needs one")
    path = trial.user_attrs.get(ATTR_CHECKPOINT)
    if not path:
        raise AuditError(
            f"baseline trial {trial.number} of {config.name!r} kept no checkpoint; --prior auto needs "
            "the baseline trained by the same `run --prior auto`"
        )
    model, _, trained_on = load_source(str(owned_checkpoint(path, study)), config.storage)
    profile = replace(audit_model(model, source=f"{config.name}:{trial.number}", trained_on=trained_on), checkpoint=str(path))
    prior = make_prior(profile, config, ctx.family, top_k)
    seed_study(ctx, prior, profile)
    return prior
