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
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import optuna
from optuna.trial import TrialState

from prism import Schedule
from search.analysis.budget import budget
from search.analysis.sequential import plan_of
from search.analysis.stored import is_stored
from search.analysis.summary import ConfirmationRow, paired_baseline
from search.attrs import ATTR_AUDIT, ATTR_CHECKPOINT, ATTR_PRIOR, PRIOR_RANK, ROLE_SEARCH, SCHEDULE, SEED, SOURCE, SOURCE_PRIOR
from search.config import StudyConfig
from search.errors import AuditError, ConfigError, PriorError
from search.runner.cluster import check_cluster
from search.runner.context import StudyContext
from search.runner.preflight import preflight
from search.runner.progress import StudyProgress
from search.signals import sigterm_as_ctrl_c
from search.storage import creation_lock, driver_lock, open_storage
from search.storage.records import enqueue
from search.study.confirmation import run_confirmation, top_schedules
from search.study.create import enqueue_missing_baselines, open_study, reopen_study, store_config
from search.study.experiment import current, run_experiment
from search.study.policy import StopWhenExhausted, first_stop, search_policies
from search.study.pruning import make_stopping
from search.study.samplers import narrowed, reachable_target

if TYPE_CHECKING:
    from search.priors import Prior, Profile  # loads torch: only the commands that train read a prior


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


class StudyInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM during a study's run, resume or confirmation; in-flight trials were queued again.
    `stored`: whether the study exists in its storage (False: interrupted before it was created, nothing was
    stored). Known without a database read where the study was open, which a loaded machine may not finish in
    time (`ray job stop` kills the driver 3 s after its SIGTERM)."""

    def __init__(self, stored: bool) -> None:
        super().__init__("interrupted")
        self.stored = stored


def execute(
    config: StudyConfig,
    address: str | None,
    *,
    progress: StudyProgress,
    resumed: optuna.Study | None = None,
    prior: str | None = None,
    retry_baselines: bool = False,
) -> tuple[optuna.Study, float | None]:
    """`run` and `resume` (`resumed`: the study `reopen` read): check the config against this machine, open the
    study, recover stale trials, seed, drive trials. `prior`: the --prior flag (run); `retry_baselines` (resume):
    queue the baseline and reference runs that failed for good once more. The trackers, the corpus, the schedule
    space and the study are resolved here once, into the study's context, and handed down.

    Returns the study and the wall time of the trials driven (None: the study had reached its target). A Ctrl-C
    or SIGTERM raises StudyInterrupted after in-flight trials were queued again."""
    from search.tracking import make_trackers

    choice = parse_prior(prior, config)  # a prior file is checked before anything is stored
    # --prior auto: the baseline runs keep their checkpoints (the prior is measured on them)
    fingerprint = preflight(keeping_checkpoints(config) if isinstance(choice, AutoPrior) else config, address=address)
    if choice is not None and config.experiment is not None:
        raise ConfigError("--prior: an experiment trains only its pre-registered pairs (fix: drop --prior)")
    if resumed is None:
        check_cluster(address, config.storage)  # `resume` checked it before reading the storage (reopen)
    trackers = make_trackers(config.tracking)  # a missing tracker library fails here, before any compute
    with driver_lock(config.storage):
        with creation_lock(config.storage):
            if resumed is None:
                ctx = open_study(config, open_storage(config.storage), fingerprint, trackers)
            else:
                ctx = reopen_study(resumed, config, fingerprint, trackers, fix="start a new study")
                store_config(ctx.study, config)  # a new --n-trials target, stored as `run` stores it
                missing = enqueue_missing_baselines(ctx, retry_failed=retry_baselines)
                if missing:  # a driver killed while creating the study queued only some of them, or --retry-baselines
                    progress.note(f"queued the baseline runs the study lacked: {', '.join(missing)}")
        try:
            return _drive(ctx, address, progress=progress, prior=choice)
        except StudyInterrupted:
            raise
        except KeyboardInterrupt as interrupt:
            raise StudyInterrupted(stored=True) from interrupt


def stored_when_interrupted(config: StudyConfig, interrupt: KeyboardInterrupt, *, resuming: bool) -> StudyInterrupted:
    """A Ctrl-C or SIGTERM during `run` or `resume`, told apart by whether the study is stored (its config marks it
    created): the database is asked only when `interrupt` came before the study was open."""
    if isinstance(interrupt, StudyInterrupted):
        return interrupt
    return StudyInterrupted(stored=resuming or is_stored(config.name, config.storage))


def _drive(ctx: StudyContext, address: str | None, *, progress: StudyProgress, prior: PriorChoice) -> tuple[optuna.Study, float | None]:
    """execute's work, under the driver lock, once the study is open: from recovering what a lost driver left to
    the study's target."""
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
        progress.note(f"experiment {config.name} has ended: {decided.text()}; nothing to run")
        return study, None
    policies = search_policies(config, ctx.family)
    full = first_stop(policies, done)
    if plan is None and (done.searched >= config.n_trials or full):
        why = f" ({full.text()})" if full and done.searched < config.n_trials else ""
        progress.note(f"study {config.name} already has {done.searched}/{config.n_trials} trained trials{why}; nothing to run")
        return study, None
    workers = config.resources.workers
    _join_ray(address, config, progress)
    progress.begin(config.name, config.n_trials, done.searched)
    started = time.monotonic()
    try:
        with sigterm_as_ctrl_c():
            if plan is not None:
                run_experiment(ctx, plan, progress)
                return study, time.monotonic() - started
            _seed_with_prior(ctx, prior, progress)
            driver = Driver(ctx, progress, stopping=make_stopping(ctx), policies=policies)
            # the driver counts every trained trial: the confirmation runs held so far sit on top of n_trials
            driver.run(reachable_target(study, config.n_trials + done.confirmation), workers)
    finally:
        progress.close()
    return study, time.monotonic() - started


def confirm(
    study: optuna.Study, config: StudyConfig, top: int, seeds: int, address: str | None, progress: StudyProgress
) -> list[ConfirmationRow]:
    """`confirm`: re-train the `top` schedules and uniform on fresh seeds (search.study.confirmation); returns the
    confirmation rows. `study`: the stored study; `config`: its config with the command's flags (workers, trackers:
    a stored URI keeps no credentials, search.outputs.urls)."""
    from search.tracking import make_trackers

    fingerprint = preflight(config, address=address)
    trackers = make_trackers(config.tracking)  # a missing library or a stored URI without its credentials: refused here
    planned = (len(top_schedules(study, config, top)) + 1) * seeds  # fails fast when there is nothing to confirm
    ctx = reopen_study(study, config, fingerprint, trackers, fix="confirm where the study's corpus is")
    n_workers = config.resources.workers
    with driver_lock(config.storage):
        _join_ray(address, config, progress)
        done = budget(study.get_trials(deepcopy=False), config.seed).trained
        progress.begin(study.study_name, done + planned, done)
        try:
            with sigterm_as_ctrl_c():
                return run_confirmation(ctx, top, seeds, n_workers, progress)
        except KeyboardInterrupt as interrupt:
            raise StudyInterrupted(stored=True) from interrupt
        finally:
            progress.close()


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
    model, _ = load_source(str(owned_checkpoint(path, study)), config.storage)
    profile = replace(audit_model(model, source=f"{config.name}:{trial.number}"), checkpoint=str(path))
    prior = make_prior(profile, config, ctx.family, top_k)
    seed_study(ctx, prior, profile)
    return prior
