"""The summary users read (`status`, `best`, the dashboard, checkpoint retention): what a study's trials show.

The uniform baseline's first seed is the study seed, like every search trial's, so its gap to any schedule is a
paired comparison. A gap is the mean of such per-seed differences with a t interval (search.analysis.stats); the best of N
is selected on the search seed, so only its gap on fresh confirmation seeds is free of that selection.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from functools import lru_cache

import optuna
from optuna.trial import FrozenTrial, TrialState

from search.analysis.budget import budget, exhausted
from search.analysis.constraints import is_feasible
from search.analysis.stats import PairedGap, RungAgreement, paired_gap, rung_fidelity
from search.attrs import CURVE, DUPLICATE_ATTR, ERROR, REFERENCE, ROLE, ROLE_BASELINE, ROLE_CONFIRM, ROLE_REFERENCE, SCHEDULE, SEED, WORKER
from search.config import StudyConfig, family_for
from search.storage.records import FINISHED, failed_for_good, stored_config


@dataclass(frozen=True)
class GapReport:
    """A schedule's paired gap to uniform: on the seeds the search used, and on confirmation seeds once confirmed.
    `selected_from` is N when this schedule was picked as the best of N on the search seed (winner's curse)."""

    search: PairedGap | None
    confirmed: PairedGap | None = None
    selected_from: int | None = None

    def text(self, next_step: str = "") -> str:
        """The confirmed gap first when there is one, then the search-seed value it was selected on."""

        def said(gap: PairedGap) -> str:
            return gap.text(next_step) + (f" {gap.verdict}" if gap.low is not None else "")

        if self.confirmed is not None:
            search = f"; search seed {self.search.mean:+.4f}" if self.search else ""
            picked = f", selected as best of {self.selected_from} schedules" if self.selected_from else ""
            return f"confirmed {said(self.confirmed)}{search}{picked}"
        if self.search is None:
            return "n/a"
        picked = f", selected as best of {self.selected_from} schedules (not confirmed)" if self.selected_from else ""
        return f"{said(self.search)}{picked}"


@dataclass
class Summary:
    name: str
    counts: dict[str, int]
    best_schedule: str | None
    best_value: float | None
    best_number: int | None
    baseline_schedule: str
    baseline_value: float | None  # paired baseline: same seed as every search trial
    best_gap: GapReport | None  # the best's paired gap to uniform (negative = better); the runner-up's when uniform wins
    n_trials: int
    uniform_noise_floor: float | None = None  # sd of uniform's val loss across baseline seeds, not a gap's noise
    objectives: list[str] = field(default_factory=lambda: ["val_loss"])
    references: list[dict] = field(default_factory=list)  # name, schedule, val_loss, gap (GapReport)
    pareto: list[dict] = field(default_factory=list)  # multi-objective: feasible non-dominated trials
    infeasible: int = 0  # finished trials below search.min_throughput_ratio
    duplicates: int = 0  # trials served by the duplicate cache
    trained: int = 0  # finished trials of the search that trained: what n_trials counts (search.analysis.budget)
    confirmation_runs: int = 0  # finished confirmation runs that trained, apart from n_trials
    exhausted: str | None = None  # why the study stopped short of n_trials, when the space ran out
    confirmation: list[dict] = field(default_factory=list)  # `prism-search confirm`: one row per schedule
    fidelity: list[RungAgreement] | None = None  # None: fewer than MIN_CURVES complete learning curves
    failed_runs: list[str] = field(default_factory=list)  # baseline and reference runs that failed for good
    runner_up: str | None = None  # when uniform itself is the best: the best other schedule, whose gap best_gap is
    kernels: list[str] = field(default_factory=list)  # what did the arithmetic of the trained runs (worker.kernels)

    def to_dict(self) -> dict:
        return asdict(self) | {"gap_text": self.gap_text(), "fidelity_warnings": self.fidelity_warnings(), "warnings": self.warnings()}

    @property
    def confirm_command(self) -> str:
        return f"prism-search confirm {self.name} --top 1 --seeds 3"

    @property
    def uniform_is_best(self) -> bool:
        return self.best_schedule is not None and self.best_schedule == self.baseline_schedule

    def gap_text(self) -> str:
        """The best's gap; when uniform is the best, saying "+0.0000 against itself" would hide the answer, so
        the text says uniform won and gives the best other schedule's gap."""
        if self.uniform_is_best and self.runner_up is None:
            return "none yet: uniform is the only schedule finished at the search seed"
        gap = self.best_gap.text(self.confirm_command) if self.best_gap else "n/a"
        if self.uniform_is_best:
            return f"none: uniform is the best schedule at the search seed; the best other, {self.runner_up}: {gap}"
        return gap

    def failed_text(self) -> str:
        """The failed_runs and what to do: run and resume leave them failed (search.study.create)."""
        return (
            f"{'; '.join(self.failed_runs)}; not queued again automatically: `prism-search resume {self.name} --retry-baselines` "
            "queues them once more (a divergence repeats: that needs a new study with other train settings)"
        )

    @property
    def confirmed(self) -> bool:
        return self.best_gap is not None and self.best_gap.confirmed is not None

    def fidelity_warnings(self) -> list[str]:
        return [w for r in self.fidelity or [] if (w := r.warning())]

    def warnings(self) -> list[str]:
        """Everything `status` and the dashboard warn about: unreliable rungs, and runs on mixed hardware, where the
        same (schedule, seed) does not repeat bit for bit (docs/results.md), so a pair across kinds is not exact."""
        out = self.fidelity_warnings()
        if len(self.kernels) > 1:
            out.append(
                f"the runs were trained on {len(self.kernels)} kinds of hardware ({', '.join(self.kernels)}): the same run "
                "differs across kinds, so paired gaps between them carry that difference too; keep a study on one kind"
            )
        return out


def val_loss(trial: FrozenTrial) -> float:
    """The first objective is always val_loss (the config enforces it)."""
    return trial.values[0]


def ranked(study: optuna.Study, config: StudyConfig | None = None) -> list[FrozenTrial]:
    """Feasible COMPLETE trials at the study seed, best val loss first: the ones that compete for "best".
    Baseline repeats at other seeds and confirmation runs measure noise; they never compete."""
    config = config or stored_config(study)
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    paired = [
        t
        for t in complete
        if t.user_attrs.get(SEED, config.seed) == config.seed and t.user_attrs.get(ROLE) != ROLE_CONFIRM and is_feasible(t)
    ]
    return sorted(paired, key=val_loss)


def other_schedules(competing: list[FrozenTrial], baseline: str) -> list[str]:
    """The distinct schedules of `ranked` trials other than the baseline, best first: what `confirm --top` re-trains,
    and the runner-up shown when uniform itself is the best."""
    return list(dict.fromkeys(s for t in competing if (s := t.user_attrs.get(SCHEDULE)) not in (baseline, None)))


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
    return next((t for t in trials if t.state == TrialState.COMPLETE and t.values and is_paired_baseline(t.user_attrs, config)), None)


def paired_runs(trials: list[FrozenTrial]) -> dict[tuple[str, int], float]:
    """Val loss of each (schedule, seed) over COMPLETE trials of any role, counted once: a duplicate served by
    the cache shares its original's values, and the same schedule at the same seed is the same run."""
    return {
        (t.user_attrs[SCHEDULE], t.user_attrs[SEED]): val_loss(t)
        for t in trials
        if t.state == TrialState.COMPLETE and t.values and SCHEDULE in t.user_attrs and SEED in t.user_attrs
    }


def paired_diffs(runs: dict[tuple[str, int], float], schedule: str, baseline: str, seeds) -> list[float]:
    """schedule - uniform at every seed of `seeds` where both ran."""
    return [runs[(schedule, s)] - runs[(baseline, s)] for s in sorted(seeds) if (schedule, s) in runs and (baseline, s) in runs]


def confirm_seeds_run(trials: list[FrozenTrial]) -> set[int]:
    """Seeds of finished confirmation runs: never a search seed, so a gap on them is free of the selection."""
    return {t.user_attrs[SEED] for t in trials if t.state == TrialState.COMPLETE and t.user_attrs.get(ROLE) == ROLE_CONFIRM}


def gap_report(runs: dict, schedule: str, baseline: str, confirm_seeds: set[int], selected_from: int | None = None) -> GapReport:
    search_seeds = {seed for _, seed in runs} - confirm_seeds
    return GapReport(
        search=paired_gap(paired_diffs(runs, schedule, baseline, search_seeds)),
        confirmed=paired_gap(paired_diffs(runs, schedule, baseline, confirm_seeds)),
        selected_from=selected_from,
    )


def confirmation_rows(trials: list[FrozenTrial], baseline: str) -> list[dict]:
    """One row per confirmed schedule (uniform first, then by mean val loss): its val loss over the confirmation
    seeds (mean, sd) and its paired gap to uniform on those seeds only."""
    runs = paired_runs(trials)
    seeds = confirm_seeds_run(trials)
    schedules = {t.user_attrs[SCHEDULE] for t in trials if t.user_attrs.get(ROLE) == ROLE_CONFIRM and SCHEDULE in t.user_attrs}
    rows = []
    for schedule in schedules:
        values = [runs[(schedule, s)] for s in sorted(seeds) if (schedule, s) in runs]
        rows.append(
            {
                "schedule": schedule,
                "seeds": len(values),
                "val_loss_mean": statistics.fmean(values) if values else None,
                "val_loss_std": statistics.stdev(values) if len(values) >= 2 else None,
                "gap": paired_gap(paired_diffs(runs, schedule, baseline, seeds)) if schedule != baseline else None,
            }
        )
    return sorted(rows, key=lambda r: (r["schedule"] != baseline, r["val_loss_mean"] if r["val_loss_mean"] is not None else math.inf))


def full_curves(trials: list[FrozenTrial]) -> tuple[tuple[tuple[tuple[int, float], ...], ...], tuple[float, ...]]:
    """Learning curves (tokens -> val loss) and final val losses of the COMPLETE, trained (not cache-served)
    trials whose curve reaches the longest budget any of them reached."""
    done = []
    for t in trials:
        if t.state != TrialState.COMPLETE or not t.values or DUPLICATE_ATTR in t.user_attrs:
            continue
        curve = {int(k): float(v) for k, v in t.intermediate_values.items()} or {int(a): float(b) for a, b in t.user_attrs.get(CURVE, [])}
        if curve:
            done.append((tuple(sorted(curve.items())), val_loss(t)))
    last = max((c[-1][0] for c, _ in done), default=0)
    full = [(c, f) for c, f in done if c[-1][0] == last]
    return tuple(c for c, _ in full), tuple(f for _, f in full)


@lru_cache(maxsize=32)
def fidelity(curves: tuple, finals: tuple[float, ...], reduction_factor: int) -> list[RungAgreement] | None:
    """Cached on the curves themselves: a dashboard refresh bootstraps again only after a trial completes. Large
    studies get fewer resamples (1,000 up to 1,000 trials, 200 from 5,000): their intervals are narrow anyway,
    and the work stays about 10^6 ranks per evaluation point."""
    n_boot = max(200, min(1000, 1_000_000 // max(1, len(finals))))
    return rung_fidelity([dict(c) for c in curves], list(finals), reduction_factor, n_boot=n_boot, seed=0)


def summarize(study: optuna.Study) -> Summary:
    config = stored_config(study)
    trials = study.get_trials(deepcopy=False)
    done = budget(trials, config.seed)
    counts = {s.name: 0 for s in TrialState}
    for t in trials:
        counts[t.state.name] += 1
    complete = [t for t in trials if t.state == TrialState.COMPLETE and t.values]
    competing = ranked(study, config)
    best: FrozenTrial | None = next(iter(competing), None)
    baseline = str(config.baseline)
    runs = paired_runs(trials)
    # uniform at the study seed is the paired baseline's run alone: its value and every gap paired with it
    runs.pop((baseline, config.seed), None)
    if (paired := paired_baseline(trials, config)) is not None:
        runs[(baseline, config.seed)] = val_loss(paired)
    confirm_seeds = confirm_seeds_run(trials)
    baselines = [val_loss(t) for t in complete if t.user_attrs.get(ROLE) == ROLE_BASELINE]
    n_schedules = len({t.user_attrs.get(SCHEDULE) for t in competing})
    best_schedule = best.user_attrs.get(SCHEDULE) if best else None
    uniform_wins = best_schedule == baseline
    # when uniform itself is the best, the gap worth showing is the best other schedule's
    runner_up = next(iter(other_schedules(competing, baseline)), None) if uniform_wins else None
    shown = runner_up if uniform_wins else best_schedule
    references = [
        {
            "name": t.user_attrs.get(REFERENCE, t.user_attrs[SCHEDULE]),
            "schedule": t.user_attrs[SCHEDULE],
            "val_loss": val_loss(t),
            "gap": gap_report(runs, t.user_attrs[SCHEDULE], baseline, confirm_seeds),
        }
        for t in complete
        if t.user_attrs.get(ROLE) == ROLE_REFERENCE and t.user_attrs.get(SEED) == config.seed  # one row per reference
    ]
    pareto = [
        {"number": t.number, "schedule": t.user_attrs.get(SCHEDULE), **dict(zip(config.search.objectives, t.values))}
        for t in (pareto_trials(competing) if len(config.search.objectives) > 1 else [])
    ]
    return Summary(
        name=study.study_name,
        counts={k: v for k, v in counts.items() if v},
        best_schedule=best_schedule,
        best_value=val_loss(best) if best else None,
        best_number=best.number if best else None,
        baseline_schedule=baseline,
        baseline_value=runs.get((baseline, config.seed)),
        best_gap=gap_report(runs, shown, baseline, confirm_seeds, n_schedules - uniform_wins) if shown else None,
        n_trials=config.n_trials,
        uniform_noise_floor=statistics.stdev(baselines) if len(baselines) >= 2 else None,
        objectives=list(config.search.objectives),
        references=sorted(references, key=lambda r: r["val_loss"]),
        pareto=sorted(pareto, key=lambda p: p["val_loss"]),
        infeasible=sum(not is_feasible(t) for t in trials if t.state in FINISHED),
        duplicates=done.served,
        trained=done.searched,
        confirmation_runs=done.confirmation,
        exhausted=exhausted(done, family_for(config), config.n_trials) if done.searched < config.n_trials else None,
        confirmation=confirmation_rows(trials, baseline),
        fidelity=fidelity(*full_curves(trials), config.search.reduction_factor),
        failed_runs=[
            f"{role} {schedule} seed {seed} (trial {t.number}: {t.user_attrs.get(ERROR, 'no error recorded')})"
            for (role, schedule, seed), t in failed_for_good(trials).items()
            if role in (ROLE_BASELINE, ROLE_REFERENCE)
        ],
        runner_up=runner_up,
        kernels=sorted({k for t in complete if (k := t.user_attrs.get(WORKER, {}).get("kernels"))}),
    )
