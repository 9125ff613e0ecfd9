"""Studies in the database: creation with everything needed to resume, and the summary users read.

A study stores its full validated config and its corpus fingerprint as study user attrs, so `resume NAME`
needs no TOML and refuses a corpus that changed. The uniform baseline is enqueued first, once per
`baseline_seeds`; the first baseline uses the study seed like every search trial, so its gap to any schedule
is a paired comparison. A gap is the mean of such per-seed differences with a t interval (search.stats); the best
of N is selected on the search seed, so only its gap on fresh confirmation seeds is free of that selection.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import asdict, dataclass, field
from functools import lru_cache

import optuna
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from prism import CorpusError, Schedule, allowed_head_counts, load_corpus
from search import samplers
from search.config import OBJECTIVES, ConfigError, PrismSearchError, StudyConfig, parse_config
from search.constraints import is_feasible
from search.early_stopping import budget_tokens
from search.families import ScheduleFamily, make_family
from search.references import Reference, parse_reference
from search.stats import PairedGap, RungAgreement, paired_gap, rung_fidelity
from search.storage.budget import budget, exhausted
from search.storage.records import DUPLICATE_ATTR

ATTR_CONFIG = "prism.config"
ATTR_FINGERPRINT = "prism.corpus_fingerprint"
ATTR_CONFIRMATION = "prism.confirmation"  # + ".plan": the schedules and seed count `confirm` queued
FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)

optuna.logging.set_verbosity(optuna.logging.WARNING)


def family_for(config: StudyConfig) -> ScheduleFamily:
    counts = allowed_head_counts(config.model_config_)
    return make_family(config.space.family, config.model.n_layer, counts, config.space.late_zone)


def references_for(config: StudyConfig) -> list[Reference]:
    counts = allowed_head_counts(config.model_config_)
    return [parse_reference(text, config.model.n_layer, counts, config.baseline.heads[0]) for text in config.space.references]


def make_sampler(config: StudyConfig) -> optuna.samplers.BaseSampler:
    return samplers.make_sampler(config, family_for(config))


def make_pruner(config: StudyConfig) -> optuna.pruners.BasePruner:
    """Pruner budgets are in training tokens, the unit every trial reports its intermediate values in.
    Multi-objective studies get no Optuna pruner: `search.early_stopping.RungStopping` stops their trials."""
    min_resource, max_resource = budget_tokens(config)
    factor = config.search.reduction_factor
    match config.search.pruner if len(config.search.objectives) == 1 else "none":
        case "hyperband":
            return optuna.pruners.HyperbandPruner(min_resource=min_resource, max_resource=max_resource, reduction_factor=factor)
        case "successive-halving":
            return optuna.pruners.SuccessiveHalvingPruner(min_resource=min_resource, reduction_factor=factor)
        case "median":
            return optuna.pruners.MedianPruner(n_startup_trials=config.search.n_startup_trials, n_warmup_steps=min_resource)
        case _:
            return optuna.pruners.NopPruner()


def stored_config(study: optuna.Study) -> StudyConfig:
    raw = study.user_attrs.get(ATTR_CONFIG)
    if raw is None:
        raise PrismSearchError(f"study {study.study_name!r} was not created by prism-search (no stored config)")
    source = f"stored config of study {study.study_name!r}"
    try:
        return parse_config(json.loads(raw), source, stored=True)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{source}: not valid JSON ({e}); the study attr {ATTR_CONFIG!r} was changed outside prism-search") from None
    except ConfigError as e:  # the TOML hint ("remove it") does not apply to a stored study
        raise ConfigError(f"{str(e).split('; ')[0]}; open the study with the prism-search version that created it") from None


def _comparable(config: StudyConfig) -> dict:
    """The parts of a config that must not change over a study's life (trial count, storage, workers may)."""
    return config.model_dump(exclude={"n_trials", "storage", "resources", "keep_checkpoints", "checkpoint_dir"})


def load_study(name: str, storage: optuna.storages.BaseStorage) -> optuna.Study:
    try:
        probe = optuna.load_study(study_name=name, storage=storage)
    except KeyError:
        names = ", ".join(s.study_name for s in optuna.get_all_study_summaries(storage)) or "none"
        raise PrismSearchError(f"no study named {name!r} in this storage (studies: {names}); check the name or --storage") from None
    config = stored_config(probe)
    return optuna.load_study(study_name=name, storage=storage, sampler=make_sampler(config), pruner=make_pruner(config))


def open_study(config: StudyConfig, storage: optuna.storages.BaseStorage, fingerprint: str) -> optuna.Study:
    """Create the study (baseline and references enqueued) or reopen it after checking nothing drifted."""
    study = optuna.create_study(
        study_name=config.name,
        storage=storage,
        load_if_exists=True,
        directions=[OBJECTIVES[o] for o in config.search.objectives],
        sampler=make_sampler(config),
        pruner=make_pruner(config),
    )
    if ATTR_CONFIG in study.user_attrs:
        previous = stored_config(study)
        if _comparable(previous) != _comparable(config):
            raise PrismSearchError(
                f"study {config.name!r} exists with a different model/space/train/data/search config; "
                f"use `prism-search resume {config.name}` or give the study a new name"
            )
        if study.user_attrs.get(ATTR_FINGERPRINT) != fingerprint:
            raise PrismSearchError(
                f"study {config.name!r} was trained on a corpus with fingerprint "
                f"{study.user_attrs.get(ATTR_FINGERPRINT)}, this one has {fingerprint}; use a new study name"
            )
        study.set_user_attr(ATTR_CONFIG, config.model_dump_json())  # n_trials and resources may change
        return study
    study.set_user_attr(ATTR_CONFIG, config.model_dump_json())
    study.set_user_attr(ATTR_FINGERPRINT, fingerprint)
    study.set_metric_names(list(config.search.objectives))
    family = family_for(config)
    seeds = [config.seed + k for k in range(config.search.baseline_seeds)]
    for seed in seeds:
        enqueue(study, family, config.baseline, role="baseline", seed=seed)
    for seed in seeds:  # a reference runs at every baseline seed: its gap to uniform is paired on all of them
        for ref in references_for(config):
            enqueue(study, family, ref.schedule, role="reference", seed=seed, reference=ref.name)
    return study


def enqueue(study: optuna.Study, family: ScheduleFamily, schedule: Schedule, *, role: str, seed: int, **attrs) -> None:
    """Queue a schedule. A schedule outside the family still runs; its params are then left to the sampler."""
    params = family.params_for(schedule) if family.contains(schedule) else {}
    study.enqueue_trial(params, user_attrs={"role": role, "seed": seed, "schedule": str(schedule), **attrs})


def corpus_fingerprint(config: StudyConfig) -> str:
    """Load the corpus once up front, so a bad corpus fails here with one line, before Ray or the database."""
    try:
        corpus = load_corpus(config.data.corpus, config.data.val_fraction, **config.data.corpus_options())
    except CorpusError as e:
        raise ConfigError(f"data.corpus: {e}") from None
    if corpus.vocab_size > config.model.vocab_size:
        raise ConfigError(
            f"model.vocab_size={config.model.vocab_size} is smaller than the corpus vocab {corpus.vocab_size}; "
            f"set model.vocab_size = {corpus.vocab_size}"
        )
    return corpus.fingerprint


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
    best_gap: GapReport | None  # the best's paired gap to uniform (negative = better than uniform)
    n_trials: int
    uniform_noise_floor: float | None = None  # sd of uniform's val loss across baseline seeds, not a gap's noise
    objectives: list[str] = field(default_factory=lambda: ["val_loss"])
    references: list[dict] = field(default_factory=list)  # name, schedule, val_loss, gap (GapReport)
    pareto: list[dict] = field(default_factory=list)  # multi-objective: feasible non-dominated trials
    infeasible: int = 0  # finished trials below search.min_throughput_ratio
    duplicates: int = 0  # trials served by the duplicate cache
    trained: int = 0  # finished trials that trained: what n_trials counts (search.storage.budget)
    exhausted: str | None = None  # why the study stopped short of n_trials, when the space ran out
    confirmation: list[dict] = field(default_factory=list)  # `prism-search confirm`: one row per schedule
    fidelity: list[RungAgreement] | None = None  # None: fewer than MIN_CURVES complete learning curves

    def to_dict(self) -> dict:
        return asdict(self) | {"gap_text": self.gap_text(), "fidelity_warnings": self.fidelity_warnings()}

    @property
    def confirm_command(self) -> str:
        return f"prism-search confirm {self.name} --top 1 --seeds 3"

    def gap_text(self) -> str:
        return self.best_gap.text(self.confirm_command) if self.best_gap else "n/a"

    @property
    def confirmed(self) -> bool:
        return self.best_gap is not None and self.best_gap.confirmed is not None

    def fidelity_warnings(self) -> list[str]:
        return [w for r in self.fidelity or [] if (w := r.warning())]


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
        if t.user_attrs.get("seed", config.seed) == config.seed and t.user_attrs.get("role") != "confirm" and is_feasible(t)
    ]
    return sorted(paired, key=val_loss)


def pareto_front(trials: list[FrozenTrial], directions: list[StudyDirection]) -> list[FrozenTrial]:
    """Trials no other trial dominates (at least as good in every objective, better in one); one per schedule."""
    signs = [1 if d == StudyDirection.MINIMIZE else -1 for d in directions]
    keys = {t.number: [s * v for s, v in zip(signs, t.values)] for t in trials}

    def dominates(a: list[float], b: list[float]) -> bool:
        return all(x <= y for x, y in zip(a, b)) and a != b

    front = [t for t in trials if not any(dominates(keys[o.number], keys[t.number]) for o in trials)]
    unique = {t.user_attrs.get("schedule"): t for t in reversed(front)}  # a duplicate shares its original's values
    return sorted(unique.values(), key=lambda t: t.number)


def paired_runs(trials: list[FrozenTrial]) -> dict[tuple[str, int], float]:
    """Val loss of each (schedule, seed) over COMPLETE trials of any role, counted once: a duplicate served by
    the cache shares its original's values, and the same schedule at the same seed is the same run."""
    return {
        (t.user_attrs["schedule"], t.user_attrs["seed"]): val_loss(t)
        for t in trials
        if t.state == TrialState.COMPLETE and t.values and "schedule" in t.user_attrs and "seed" in t.user_attrs
    }


def paired_diffs(runs: dict[tuple[str, int], float], schedule: str, baseline: str, seeds) -> list[float]:
    """schedule - uniform at every seed of `seeds` where both ran."""
    return [runs[(schedule, s)] - runs[(baseline, s)] for s in sorted(seeds) if (schedule, s) in runs and (baseline, s) in runs]


def confirm_seeds_run(trials: list[FrozenTrial]) -> set[int]:
    """Seeds of finished confirmation runs: never a search seed, so a gap on them is free of the selection."""
    return {t.user_attrs["seed"] for t in trials if t.state == TrialState.COMPLETE and t.user_attrs.get("role") == "confirm"}


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
    schedules = {t.user_attrs["schedule"] for t in trials if t.user_attrs.get("role") == "confirm" and "schedule" in t.user_attrs}
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
        curve = {int(k): float(v) for k, v in t.intermediate_values.items()} or {int(a): float(b) for a, b in t.user_attrs.get("curve", [])}
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
    confirm_seeds = confirm_seeds_run(trials)
    baselines = [val_loss(t) for t in complete if t.user_attrs.get("role") == "baseline"]
    n_schedules = len({t.user_attrs.get("schedule") for t in competing})
    references = [
        {
            "name": t.user_attrs.get("reference", t.user_attrs["schedule"]),
            "schedule": t.user_attrs["schedule"],
            "val_loss": val_loss(t),
            "gap": gap_report(runs, t.user_attrs["schedule"], baseline, confirm_seeds),
        }
        for t in complete
        if t.user_attrs.get("role") == "reference" and t.user_attrs.get("seed") == config.seed  # one row per reference
    ]
    pareto = [
        {"number": t.number, "schedule": t.user_attrs.get("schedule"), **dict(zip(config.search.objectives, t.values))}
        for t in (pareto_front(competing, study.directions) if len(config.search.objectives) > 1 else [])
    ]
    return Summary(
        name=study.study_name,
        counts={k: v for k, v in counts.items() if v},
        best_schedule=best.user_attrs.get("schedule") if best else None,
        best_value=val_loss(best) if best else None,
        best_number=best.number if best else None,
        baseline_schedule=baseline,
        baseline_value=runs.get((baseline, config.seed)),
        best_gap=gap_report(runs, best.user_attrs["schedule"], baseline, confirm_seeds, n_schedules) if best else None,
        n_trials=config.n_trials,
        uniform_noise_floor=statistics.stdev(baselines) if len(baselines) >= 2 else None,
        objectives=list(config.search.objectives),
        references=sorted(references, key=lambda r: r["val_loss"]),
        pareto=sorted(pareto, key=lambda p: p["val_loss"]),
        infeasible=sum(not is_feasible(t) for t in trials if t.state in FINISHED),
        duplicates=done.served,
        trained=done.trained,
        exhausted=exhausted(done, family_for(config), config.n_trials) if done.trained < config.n_trials else None,
        confirmation=confirmation_rows(trials, baseline),
        fidelity=fidelity(*full_curves(trials), config.search.reduction_factor),
    )
