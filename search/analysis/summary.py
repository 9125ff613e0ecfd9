"""The summary users read (`status`, `best`, the dashboard, the report): what a study's trials show and decided.

The uniform baseline's first seed is the study seed, like every search trial's, so its gap to any schedule is a
paired comparison. Schedules are ranked by their paired mean gap to uniform over every seed they ran; the verdict
(search.analysis.verdict) reads the many-to-one family (search.analysis.blocked), judging a searched schedule only on
seeds it was not selected on; rung fidelity is measured within seeds (search.analysis.fidelity).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache

import optuna
from optuna.trial import FrozenTrial, TrialState

from search.analysis.blocked import Fit, ManyToOne, ScheduleGap, many_to_one
from search.analysis.budget import budget, is_served
from search.analysis.constraints import is_feasible
from search.analysis.fidelity import Curve, RungAgreement, pruning_start, rung_fidelity
from search.analysis.forecast import Cost, study_deciding_cost
from search.analysis.rounds import Rounds, RoundsProgress, round_seeds, rounds_progress
from search.analysis.scored import not_finite, scored
from search.analysis.sequential import Look, Plan, plan_of
from search.analysis.sequential import state as experiment_state
from search.analysis.stats import PairedGap, paired_gap
from search.analysis.verdict import Decision, Frozen, Verdict, decide, experiment_verdict
from search.attrs import (
    ATTR_CHECKPOINT_ERROR,
    CURVE,
    DUPLICATE_ATTR,
    ERROR,
    REFERENCE,
    ROLE,
    ROLE_BASELINE,
    ROLE_CONFIRM,
    ROLE_REFERENCE,
    ROLE_SEARCH,
    SCHEDULE,
    SEED,
    WORKER,
)
from search.config import StudyConfig
from search.storage import driver_ended, stale_trial_ids, storage_of, storage_url, trial_id
from search.storage.records import FINISHED, failed_for_good, readable, stored_config


@dataclass(frozen=True)
class GapReport:
    """A schedule's gap to uniform in the study's many-to-one family: over every seed it ran, and, for a schedule the
    search picked at its seed, over the other seeds only (free of that selection). `selected_from` is N when it was
    picked as the best of N schedules (winner's curse)."""

    all_seeds: PairedGap | None
    unselected: PairedGap | None = None  # None when no seed of it was a selection seed (references, uniform)
    selected_from: int | None = None


@dataclass(frozen=True)
class ReferenceRow:
    """A reference schedule (`[space] references`), queued at every baseline seed: its gap to uniform on them."""

    name: str
    schedule: str
    val_loss: float  # at the study seed
    gap: GapReport


@dataclass(frozen=True)
class ParetoPoint:
    number: int
    schedule: str | None
    values: dict[str, float]  # objective name -> value

    def items(self) -> list[tuple[str, object]]:
        return [("number", self.number), ("schedule", self.schedule), *self.values.items()]


@dataclass(frozen=True)
class ConfirmationRow:
    """A confirmed schedule's val loss over the confirmation seeds and its paired gap to uniform on them only."""

    schedule: str
    seeds: int
    val_loss_mean: float | None
    val_loss_std: float | None
    gap: PairedGap | None  # None for uniform itself


@dataclass(frozen=True)
class FailedRun:
    """A run all of whose tries failed, with no retry left (search.storage.records.failed_for_good)."""

    number: int  # its last try
    role: str
    schedule: str
    seed: int
    error: str | None  # as stored; None when none was recorded


@dataclass(frozen=True)
class NotFinite:
    """A COMPLETE run with an objective that is inf or nan: a failed run for the statistics, in no mean or gap."""

    number: int
    schedule: str | None
    seed: int | None
    values: dict[str, float]  # each objective whose value is not finite


@dataclass(frozen=True)
class Unsaved:
    """A finished trial whose model could not be saved (its result is stored)."""

    number: int
    error: str


@dataclass(frozen=True)
class DriverGone:
    """RUNNING trials that nothing trains any more; `resume` runs them again."""

    numbers: list[int]
    pid: int | None  # the process a SQLite study's driver lock names, which has ended; None: their heartbeats stopped


@dataclass(frozen=True)
class PruningStart:
    """min_resource_evals = "auto": the first rung from which every later rung ranks reliably (None: none does yet,
    so trials run to the end), out of `n_curves` complete learning curves."""

    rung: RungAgreement | None
    n_curves: int
    budget_tokens: int  # a full run's training tokens
    reduction_factor: int


@dataclass
class Summary:
    name: str
    counts: dict[str, int]
    verdict: Verdict  # what the study decided: better, equivalent within the margin, or undecided
    # best paired mean gap to uniform over all its seeds (uniform when nothing beats it); an experiment's: its
    # pre-registered schedule, whichever way the mean leans
    best_schedule: str | None
    best_value: float | None  # its mean val loss over `best_seeds`
    best_seeds: tuple[int, ...]
    best_number: int | None  # its trial at the study seed (else its first trial)
    baseline_schedule: str
    baseline_value: float | None  # uniform's mean val loss over `best_seeds` (where it ran): beside `best_value`
    best_gap: GapReport | None  # the best's paired gap to uniform (negative = better); the runner-up's when uniform wins
    n_trials: int
    uniform_noise_floor: float | None = None  # sd of uniform's val loss across baseline seeds, not a gap's noise
    objectives: list[str] = field(default_factory=lambda: ["val_loss"])
    gaps: list[ScheduleGap] = field(default_factory=list)  # every schedule against uniform, best paired mean first
    method: Fit | None = None  # how `gaps` were computed (blocked model or paired t, and the correction)
    references: list[ReferenceRow] = field(default_factory=list)
    pareto: list[ParetoPoint] = field(default_factory=list)  # multi-objective: feasible non-dominated trials
    infeasible: int = 0  # finished trials below search.min_throughput_ratio
    duplicates: int = 0  # trials served by the duplicate cache
    trained: int = 0  # finished trials of the search that trained: what n_trials counts (search.analysis.budget)
    confirmation_runs: int = 0  # finished confirmation runs that trained, apart from n_trials
    confirmation: list[ConfirmationRow] = field(default_factory=list)  # `prism-search confirm`: one row per schedule
    fidelity: list[RungAgreement] | None = None  # None: fewer than MIN_CURVES complete learning curves
    failed_runs: list[FailedRun] = field(default_factory=list)  # baseline and reference runs that failed for good
    failed_trials: list[FailedRun] = field(default_factory=list)  # search trials that failed for good
    not_finite: list[NotFinite] = field(default_factory=list)  # COMPLETE runs whose value is inf or nan: left out of every statistic
    driver_gone: DriverGone | None = None  # RUNNING trials whose driver is gone
    unsaved: list[Unsaved] = field(default_factory=list)  # finished trials whose model could not be saved
    runner_up: str | None = None  # when uniform itself is the best: the best other schedule, whose gap best_gap is
    kernels: list[str] = field(default_factory=list)  # what did the arithmetic of the trained runs (worker.kernels)
    mixed_seeds: list[int] = field(default_factory=list)  # seeds whose runs were trained on more than one kind of it
    pruning_from: PruningStart | None = None  # min_resource_evals = "auto": where pruning starts
    # a pre-registered experiment: its plan and each look read so far (None: not an experiment); nothing was
    # selected in one, and its next pairs come from `resume`
    plan: Plan | None = None
    looks: list[Look] | None = None
    crossed_pairs: list[tuple[str, int]] = field(
        default_factory=list
    )  # (schedule, seed) pairs whose two runs ran on different kinds of hardware
    verdict_one_kind: Verdict | None = None  # the verdict without them (None: no pair crossed)
    deciding: Cost | None = None  # undecided: what the verdict's next confirmation still trains, at the study's median tokens/s
    left_out: dict[int, str] = field(default_factory=dict)  # trials whose stored attrs cannot be read, and why
    rounds: RoundsProgress | None = None  # search.confirmation = "rounds": how far its confirmation rounds are

    @property
    def is_experiment(self) -> bool:
        """A pre-registered experiment: its schedule was fixed before its data, and only its looks decide."""
        return self.plan is not None

    @property
    def uniform_is_best(self) -> bool:
        return self.best_schedule is not None and self.best_schedule == self.baseline_schedule


def val_loss(trial: FrozenTrial) -> float:
    """The first objective is always val_loss (the config enforces it)."""
    return trial.values[0]


def ranked(study: optuna.Study, config: StudyConfig) -> list[FrozenTrial]:
    """Feasible COMPLETE trials at the study seed, best val loss first: the ones that compete for "best".
    Baseline repeats at other seeds and confirmation runs measure noise; they never compete. A COMPLETE trial without
    finite values (a damaged row, a diverged run) or a malformed attr competes for nothing."""
    return competitors(readable(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))[0], config)


def competitors(trials: list[FrozenTrial], config: StudyConfig) -> list[FrozenTrial]:
    """`ranked` of trials already read and left readable (`summarize` checks each trial's attrs once)."""
    paired = [
        t
        for t in trials
        if t.state == TrialState.COMPLETE
        and scored(t)
        and t.user_attrs.get(SEED, config.seed) == config.seed
        and t.user_attrs.get(ROLE) != ROLE_CONFIRM
        and is_feasible(t)
    ]
    return sorted(paired, key=val_loss)


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """Indices of the non-dominated points when minimising the first coordinate (val loss) and maximising the
    second (tokens/s), the only two objectives a study has.

    One sort and one sweep, O(n log n): the O(n^2) pairwise check is what makes stock dashboards slow on big studies.
    """
    order = sorted(range(len(points)), key=lambda i: (points[i][0], -points[i][1]))
    front, best = [], -math.inf
    for i in order:
        if points[i][1] > best:
            front.append(i)
            best = points[i][1]
    return front


def pareto_trials(trials: list[FrozenTrial]) -> list[FrozenTrial]:
    """The feasible competing trials on the front, one per schedule (a duplicate shares its original's values)."""
    front = [trials[i] for i in pareto_front([(val_loss(t), t.values[1]) for t in trials])]
    unique = {t.user_attrs.get(SCHEDULE): t for t in sorted(front, key=lambda t: -t.number)}
    return sorted(unique.values(), key=lambda t: t.number)


def is_paired_baseline(user_attrs: Mapping, config: StudyConfig) -> bool:
    """The uniform baseline at the study seed: the run every search trial's gap is paired with. Takes a trial's
    user attrs, so the dashboard's decoded rows ask the same question as Optuna's trials."""
    return user_attrs.get(ROLE) == ROLE_BASELINE and user_attrs.get(SEED) == config.seed


def paired_baseline(trials: list[FrozenTrial], config: StudyConfig) -> FrozenTrial | None:
    """The paired baseline's COMPLETE run (a retry comes after its failed try), never a search trial or confirm
    run that happens to train the uniform schedule."""
    return next((t for t in trials if scored(t) and is_paired_baseline(t.user_attrs, config)), None)


def paired_runs(trials: list[FrozenTrial]) -> dict[tuple[str, int], float]:
    """Val loss of each (schedule, seed) over feasible COMPLETE trials of any role, counted once: a duplicate served
    by the cache shares its original's values, and the same schedule at the same seed is the same run."""
    return {
        (t.user_attrs[SCHEDULE], t.user_attrs[SEED]): val_loss(t)
        for t in trials
        if scored(t) and SCHEDULE in t.user_attrs and SEED in t.user_attrs and is_feasible(t)
    }


def study_runs(trials: list[FrozenTrial], config: StudyConfig) -> dict[tuple[str, int], float]:
    """`paired_runs`, with uniform at the study seed taken from the paired baseline's run alone (never a search
    trial or confirmation run that happens to train the uniform schedule there)."""
    runs = paired_runs(trials)
    baseline = str(config.baseline)
    runs.pop((baseline, config.seed), None)
    if (paired := paired_baseline(trials, config)) is not None:
        runs[(baseline, config.seed)] = val_loss(paired)
    return runs


def crossed_hardware(trials: list[FrozenTrial], config: StudyConfig, runs: Mapping[tuple[str, int], float]) -> list[tuple[str, int]]:
    """The (schedule, seed) runs of `runs` whose kind of hardware (worker.kernels) differs from uniform's run at that
    seed: such a pair is not exact, since the same run on other CPU kernels or another GPU differs by about the
    size of a small gap. Runs from before kernels were recorded cross nothing."""
    kinds: dict[tuple[str, int], str] = {}
    for t in trials:
        worker = t.user_attrs.get(WORKER)
        kind = worker.get("kernels") if isinstance(worker, dict) else None
        key = (t.user_attrs.get(SCHEDULE), t.user_attrs.get(SEED))
        if (
            t.state == TrialState.COMPLETE
            and kind
            and key in runs
            and not (key == (str(config.baseline), config.seed) and t.user_attrs.get(ROLE) != ROLE_BASELINE)
        ):
            kinds[key] = kind  # type: ignore[index]
    baseline = str(config.baseline)
    return sorted(
        (schedule, seed)
        for schedule, seed in runs
        if schedule != baseline
        and (schedule, seed) in kinds
        and (baseline, seed) in kinds
        and kinds[(schedule, seed)] != kinds[(baseline, seed)]
    )


def selected_on(trials: list[FrozenTrial]) -> dict[str, set[int]]:
    """The seeds each schedule was picked on by the search (its search trials' seeds): its gaps there carry the
    winner's curse, so a "better" verdict never rests on them."""
    out: dict[str, set[int]] = {}
    for t in trials:
        if t.user_attrs.get(ROLE) == ROLE_SEARCH and SCHEDULE in t.user_attrs and SEED in t.user_attrs:
            out.setdefault(t.user_attrs[SCHEDULE], set()).add(t.user_attrs[SEED])
    return out


def paired_diffs(runs: dict[tuple[str, int], float], schedule: str, baseline: str, seeds) -> list[float]:
    """schedule - uniform at every seed of `seeds` where both ran."""
    return [runs[(schedule, s)] - runs[(baseline, s)] for s in sorted(seeds) if (schedule, s) in runs and (baseline, s) in runs]


def confirm_seeds_run(trials: list[FrozenTrial]) -> set[int]:
    """Seeds of finished confirmation runs: never a search seed, so a gap on them is free of the selection."""
    return {t.user_attrs[SEED] for t in trials if t.state == TrialState.COMPLETE and t.user_attrs.get(ROLE) == ROLE_CONFIRM}


def gap_report(decision: Decision, schedule: str, selected_from: int | None = None) -> GapReport:
    """The schedule the verdict calls better shows the test the verdict rests on (a frozen pick's: its round-2 seeds
    alone, Holm over 1), so its line and the verdict never disagree."""
    every, fresh = decision.family.gap(schedule), decision.fresh.gap(schedule)
    unselected = _shown(fresh) if fresh is not None and every is not None and fresh.seeds != every.seeds else None
    verdict = decision.verdict
    if decision.judged is not None and verdict.schedule == schedule:
        unselected = PairedGap.of(decision.judged, verdict.adjusted_p)
    return GapReport(all_seeds=_shown(every), unselected=unselected, selected_from=selected_from)


def _shown(gap: ScheduleGap | None) -> PairedGap | None:
    return None if gap is None else PairedGap.of(gap.contrast, gap.adjusted_p)


def confirmation_rows(trials: list[FrozenTrial], baseline: str) -> list[ConfirmationRow]:
    """One row per confirmed schedule (uniform first, then by mean val loss): its val loss over the confirmation
    seeds (mean, sd) and its paired gap to uniform on those seeds only."""
    runs = paired_runs(trials)
    seeds = confirm_seeds_run(trials)
    schedules = {t.user_attrs[SCHEDULE] for t in trials if t.user_attrs.get(ROLE) == ROLE_CONFIRM and SCHEDULE in t.user_attrs}
    rows = []
    for schedule in schedules:
        values = [runs[(schedule, s)] for s in sorted(seeds) if (schedule, s) in runs]
        rows.append(
            ConfirmationRow(
                schedule=schedule,
                seeds=len(values),
                val_loss_mean=statistics.fmean(values) if values else None,
                val_loss_std=statistics.stdev(values) if len(values) >= 2 else None,
                gap=paired_gap(paired_diffs(runs, schedule, baseline, seeds)) if schedule != baseline else None,
            )
        )
    return sorted(rows, key=lambda r: (r.schedule != baseline, r.val_loss_mean if r.val_loss_mean is not None else math.inf))


def full_curves(trials: list[FrozenTrial]) -> tuple[Curve, ...]:
    """Learning curves (tokens -> val loss) of the feasible COMPLETE, trained (not cache-served) runs whose curve
    reaches the longest budget any of them reached, with their schedule and seed."""
    done = []
    for t in trials:
        if not scored(t) or DUPLICATE_ATTR in t.user_attrs or SEED not in t.user_attrs:
            continue
        curve = {int(k): float(v) for k, v in t.intermediate_values.items()} or {int(a): float(b) for a, b in t.user_attrs.get(CURVE, [])}
        if curve:
            done.append(Curve(t.user_attrs.get(SCHEDULE, ""), t.user_attrs[SEED], curve, val_loss(t)))
    last = max((max(c.points) for c in done), default=0)
    return tuple(c for c in done if max(c.points) == last)


def fidelity(curves: tuple[Curve, ...], reduction_factor: int, best: str | None) -> list[RungAgreement] | None:
    """Large studies get fewer resamples (1,000 up to 1,000 runs, 200 from 5,000): their intervals are narrow
    anyway, and the work stays about 10^6 ranks per evaluation point."""
    key = tuple((c.schedule, c.seed, tuple(sorted(c.points.items())), c.final) for c in curves)
    return _fidelity(key, reduction_factor, best)


@lru_cache(maxsize=32)
def _fidelity(key: tuple, reduction_factor: int, best: str | None) -> list[RungAgreement] | None:
    """Cached on the curves themselves: a dashboard refresh bootstraps again only after a trial completes."""
    curves = [Curve(schedule, seed, dict(points), final) for schedule, seed, points, final in key]
    n_boot = max(200, min(1000, 1_000_000 // max(1, len(curves))))
    return rung_fidelity(curves, reduction_factor, best, n_boot=n_boot, seed=0)


def auto_pruning_start(trials: list[FrozenTrial], config: StudyConfig) -> int | None:
    """`min_resource_evals = "auto"`: the training tokens from which the study's own complete curves say rungs rank
    schedules reliably (search.analysis.fidelity.pruning_start), re-read as trials finish. None: nowhere yet."""
    baseline = str(config.baseline)
    best = best_by_mean(many_to_one(study_runs(trials, config), baseline), baseline)
    start = pruning_start(fidelity(full_curves(trials), config.search.reduction_factor, best))
    return start.tokens if start else None


def best_by_mean(family: ManyToOne, baseline: str) -> str:
    """The schedule with the best (shrunken) gap to uniform; uniform itself when nothing beats it."""
    leader = family.gaps[0] if family.gaps else None
    return baseline if leader is None or leader.estimate > 0 else leader.schedule


def _pruning_start(rungs: list[RungAgreement] | None, config: StudyConfig, n_curves: int) -> PruningStart | None:
    if config.search.min_resource_evals != "auto" or config.search.pruner == "none":
        return None
    full = config.train.steps * config.train.batch_size * config.model.block_size
    return PruningStart(pruning_start(rungs), n_curves, full, config.search.reduction_factor)


def schedule_ranking(trials: list[FrozenTrial], config: StudyConfig) -> list[str]:
    """Schedules other than uniform, best paired mean gap to uniform (over every seed they ran) first: what `confirm
    --top` re-trains and what the verdict names."""
    return [g.schedule for g in many_to_one(study_runs(trials, config), str(config.baseline)).gaps]


def summarize(
    study: optuna.Study, config: StudyConfig | None = None, read: tuple[list[FrozenTrial], dict[int, str]] | None = None
) -> Summary:
    """`config`: the study's config as the command already resolved it (`run`, `resume`); else read as stored.
    `read`: `readable(study.get_trials(deepcopy=False))` where the caller has it already (each attr checked once)."""
    config = config or stored_config(study)
    trials, left_out = read or readable(study.get_trials(deepcopy=False))
    done = budget(trials, config.seed)
    counts = {s.name: 0 for s in TrialState}
    for t in trials:
        counts[t.state.name] += 1
    complete = [t for t in trials if scored(t)]
    competing = competitors(trials, config)
    baseline = str(config.baseline)
    plan = plan_of(config)
    # a pre-registered experiment reads only its own pairs: `confirm` runs on it get their own table, never its gap
    paired = [t for t in trials if t.user_attrs.get(ROLE) != ROLE_CONFIRM] if plan else trials
    runs = study_runs(paired, config)
    rounds = (
        None if plan or config.search.confirmation != "rounds" else study_rounds(study, trials, config, done.searched >= config.n_trials)
    )
    frozen = Frozen(rounds.rounds.pick, frozenset(round_seeds(config, 2)), rounds.over) if rounds else None
    decision = decide(runs, baseline, selected_on(trials), config.search.margin, frozen)
    if rounds and not rounds.over and decision.verdict.kind == "undecided":  # the rounds decide, not a `confirm`
        decision = replace(decision, verdict=replace(decision.verdict, next=None))
    experiment = experiment_state(plan, runs) if plan else None
    crossed = crossed_hardware(trials, config, runs)
    if crossed:  # the same verdict read from the pairs whose two runs shared their kind of hardware
        exact = {key: v for key, v in runs.items() if key not in set(crossed)}
        on_one_kind = (
            experiment_verdict(experiment_state(plan, exact))
            if plan
            else decide(exact, baseline, selected_on(trials), config.search.margin, frozen).verdict
        )
    gaps = list(decision.family.gaps)
    leader = gaps[0] if gaps else None
    uniform_wins = not plan and (leader is None or leader.estimate > 0)  # an experiment's schedule wins nothing
    if plan:  # an experiment reports its pre-registered schedule, whichever way its mean leans
        by_mean: str | None = plan.schedule
    elif gaps or (baseline, config.seed) in runs:
        by_mean = best_by_mean(decision.family, baseline)
    else:  # no uniform run to pair with yet: the best run at the study seed
        by_mean = competing[0].user_attrs.get(SCHEDULE) if competing else None
    # what was confirmed, never a schedule one lucky seed put ahead since
    best_schedule = decision.verdict.schedule if not plan and decision.verdict.kind == "better" else by_mean
    best_seeds = tuple(sorted(seed for s, seed in runs if s == best_schedule))
    best_trial = _trial_of(competing, complete, best_schedule)
    baselines = [val_loss(t) for t in complete if t.user_attrs.get(ROLE) == ROLE_BASELINE]
    n_schedules = len({t.user_attrs.get(SCHEDULE) for t in competing} | {g.schedule for g in gaps} | {baseline})
    # when uniform itself is the best, the gap worth showing is the best other schedule's
    runner_up = leader.schedule if uniform_wins and leader else None
    shown = runner_up if uniform_wins else best_schedule
    references = [
        ReferenceRow(
            name=t.user_attrs.get(REFERENCE, t.user_attrs[SCHEDULE]),
            schedule=t.user_attrs[SCHEDULE],
            val_loss=val_loss(t),
            gap=gap_report(decision, t.user_attrs[SCHEDULE]),
        )
        for t in complete
        if t.user_attrs.get(ROLE) == ROLE_REFERENCE and t.user_attrs.get(SEED) == config.seed  # one row per reference
    ]
    pareto = [
        ParetoPoint(t.number, t.user_attrs.get(SCHEDULE), dict(zip(config.search.objectives, t.values, strict=False)))
        for t in (pareto_trials(competing) if len(config.search.objectives) > 1 else [])
    ]
    curves = full_curves(trials)
    rung_agreement = fidelity(curves, config.search.reduction_factor, by_mean)  # as `min_resource_evals = "auto"` reads it
    best_values = [runs[key] for seed in best_seeds if best_schedule is not None and (key := (best_schedule, seed)) in runs]
    # uniform on the best's seeds, so the two values shown side by side differ by the paired gap
    baseline_values = [runs[key] for seed in best_seeds or (config.seed,) if (key := (baseline, seed)) in runs]
    kernels = _kernels_by_seed(complete)
    # a schedule that failed by its own error is listed once, with its error: its copies answered without training
    # (search.runner.cache.failed_before) say only where it failed
    failed = [
        FailedRun(t.number, role, schedule, seed, t.user_attrs.get(ERROR))
        for (role, schedule, seed), t in failed_for_good([t for t in trials if not (t.state == TrialState.FAIL and is_served(t))]).items()
        if schedule is not None and seed is not None
    ]
    return Summary(
        name=study.study_name,
        counts={k: v for k, v in counts.items() if v},
        verdict=experiment_verdict(experiment) if experiment else decision.verdict,
        plan=experiment.plan if experiment else None,
        looks=list(experiment.looks) if experiment else None,
        best_schedule=best_schedule,
        best_value=statistics.fmean(best_values) if best_values else (val_loss(best_trial) if best_trial else None),
        best_seeds=best_seeds,
        best_number=best_trial.number if best_trial else None,
        baseline_schedule=baseline,
        baseline_value=statistics.fmean(baseline_values) if baseline_values else None,
        best_gap=gap_report(decision, shown, None if plan else n_schedules - uniform_wins) if shown else None,
        n_trials=config.n_trials,
        uniform_noise_floor=statistics.stdev(baselines) if len(baselines) >= 2 else None,
        objectives=list(config.search.objectives),
        gaps=[] if plan else gaps,  # an experiment's one schedule: its gap is best_gap's, judged only at the looks
        method=decision.family.method,
        references=sorted(references, key=lambda r: r.val_loss),
        pareto=sorted(pareto, key=lambda p: p.values["val_loss"]),
        infeasible=sum(not is_feasible(t) for t in trials if t.state in FINISHED),
        duplicates=done.served,
        trained=done.searched,
        confirmation_runs=done.confirmation,
        confirmation=confirmation_rows(trials, baseline),
        fidelity=rung_agreement,
        pruning_from=_pruning_start(rung_agreement, config, len(curves)),
        failed_runs=[run for run in failed if run.role in (ROLE_BASELINE, ROLE_REFERENCE)],
        failed_trials=[run for run in failed if run.role == ROLE_SEARCH],
        not_finite=[
            NotFinite(
                t.number,
                t.user_attrs.get(SCHEDULE),
                t.user_attrs.get(SEED),
                {name: v for name, v in zip(config.search.objectives, t.values, strict=False) if not math.isfinite(v)},
            )
            for t in not_finite(trials)
        ],
        driver_gone=_driver_gone(study, trials),
        unsaved=[Unsaved(t.number, t.user_attrs[ATTR_CHECKPOINT_ERROR]) for t in trials if ATTR_CHECKPOINT_ERROR in t.user_attrs],
        runner_up=runner_up,
        kernels=sorted({k for kinds in kernels.values() for k in kinds}),
        mixed_seeds=sorted(seed for seed, kinds in kernels.items() if len(kinds) > 1),
        crossed_pairs=list(crossed),
        verdict_one_kind=on_one_kind if crossed else None,
        deciding=None if experiment else study_deciding_cost(decision.verdict, decision.family, trials, config),
        left_out=left_out,
        rounds=rounds,
    )


def study_rounds(study: optuna.Study, trials: list[FrozenTrial], config: StudyConfig, search_done: bool) -> RoundsProgress:
    """How far the study's confirmation rounds are, from what they froze (stored) and the runs stored."""
    return rounds_progress(trials, config, Rounds.stored(study), search_done)


def _driver_gone(study: optuna.Study, trials: list[FrozenTrial]) -> DriverGone | None:
    """Which RUNNING trials nothing trains any more: their driver's process has ended (a SQLite study's driver
    lock names it), or their heartbeats stopped for longer than the grace period (any storage)."""
    running = [t for t in trials if t.state == TrialState.RUNNING]
    storage = storage_of(study)
    if not running or not hasattr(storage, "get_heartbeat_interval"):  # in memory: no database, no driver to lose
        return None
    pid = driver_ended(storage_url(study))
    if pid is None:
        if storage.get_heartbeat_interval() is None:  # opened without heartbeats: they cannot tell
            return None
        stale = set(stale_trial_ids(study))
        running = [t for t in running if trial_id(t) in stale]
    return DriverGone([t.number for t in running], pid) if running else None


def _kernels_by_seed(complete: list[FrozenTrial]) -> dict[int, set[str]]:
    """The kinds of hardware that trained each seed's runs (worker.kernels; runs from before it was recorded say nothing)."""
    out: dict[int, set[str]] = {}
    for t in complete:
        if (kind := t.user_attrs.get(WORKER, {}).get("kernels")) and SEED in t.user_attrs:
            out.setdefault(t.user_attrs[SEED], set()).add(kind)
    return out


def _trial_of(competing: list[FrozenTrial], complete: list[FrozenTrial], schedule: str | None) -> FrozenTrial | None:
    """The trial that stands for `schedule`: its competing run (competitors run at the study seed), else its first
    complete run."""
    if schedule is None:
        return None
    at_seed = [t for t in competing if t.user_attrs.get(SCHEDULE) == schedule]
    return next(iter(at_seed), None) or next((t for t in complete if t.user_attrs.get(SCHEDULE) == schedule), None)
