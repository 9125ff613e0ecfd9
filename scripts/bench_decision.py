"""Compute to a correct decision: the product's samplers, each followed by today's confirmation or by LUCB to uniform.

    .venv/bin/python scripts/bench_decision.py                          # 1000 paired replicates per arm and scenario
    .venv/bin/python scripts/bench_decision.py --workers 8              # the same on 8 processes
    .venv/bin/python scripts/bench_decision.py --replicates 100 --samplers additive random
    .venv/bin/python scripts/bench_decision.py --plant 1x1,2x5=-0.02 --scenarios planted --residual-noise-scale 2

The simulator: final val loss(schedule, seed) = 2 + schedule effect + seed effect + residual, with the 28 schedule
effects, the sd of the seed effects and the residual sd estimated from bench-main (docs/results/bench.db) by the
product's blocked model (search.analysis.blocked). Replicate r draws every seed effect and residual from r alone, as
one matrix (schedule x seed), so every arm meets the same runs: the comparison is paired.

Scenarios (the schedule effects; the true best is the schedule with the lowest effect, uniform included):
- fitted: bench-main's fitted effects; uniform is the true best, so "better" is never right;
- favoured -0.005 / -0.01: the fitted effects with a winner planted at that effect in the schedule other than uniform
  that an additive model of per-layer head counts (fitted to the effects) ranks best: a search that trusts the
  structure walks towards it;
- disfavoured -0.005 / -0.01: the same in the schedule that starts with a single head (the fewest heads in the
  first layer) which the model ranks worst among those: a search that trusts the structure walks away from it;
- free: the `free` family over bench-main's head counts (K^L schedules), effects = the additive model fitted to
  bench-main's effects (one coefficient per layer and head count) plus an interaction term drawn per replicate with
  the sd of that fit's residuals, uniform's set to 0;
- planted: the fitted effects with every `--plant SCHEDULE=EFFECT` applied.

Arms: a sampler (`tpe`, `gp`, `random`, `additive`: the product's own, search.study.samplers.make_sampler, seeded by
the replicate) proposes schedules through Optuna's ask/tell, each told its simulated value at the search seed (0);
uniform at the search seed is the first trial (enqueued, as the product's baseline). Then one of two confirmations:
- today: uniform at BASELINE_SEEDS baseline seeds (0 and the next), `--search` proposals, then `confirm --top 5
  --seeds 3`: the top 5 by the study's ranking and uniform on 3 fresh seeds;
- lucb: uniform at the search seed, `--lucb-search` proposals, then LUCB to the control while a step fits in the
  budget (`--lucb-runs` in all) with `--lucb-fresh` pairs kept back: a fresh paired seed (uniform's run there first,
  if missing) for the study's best schedule while its estimate is <= 0, else for the one with the lowest 95%
  lower bound below 0 (search.analysis.blocked's contrast; unmeasured counts as unbounded); no such schedule ends
  it. Then the pick is frozen (the best by the ranking other than uniform) and it and uniform run `--lucb-fresh` new
  seeds. *Better* is tested on those alone: every seed a schedule ran before the freeze counts as one it was
  selected on.
Both end with the product's verdict (search.analysis.verdict.decide, margin 0.01). A proposal of a schedule already
trained at the search seed (the space ran short) is served as the duplicate cache serves it: no run, no tokens.
The sampler is told only the search seed's runs (uniform's baselines at other seeds are not told), so both
confirmations share one search per sampler and replicate.

Reported per arm and scenario: replicates, training tokens (mean; a complete run is 2.05 M), and with 95% Wilson
intervals: how often the best by the study's ranking (paired means shrunk by their noise, search.analysis.blocked;
uniform when none is below 0) is the true best, how often "better" is claimed for the true best, and how often
for another schedule; and the wall seconds per replicate (one search and both confirmations). Rows are printed as
each (scenario, sampler) ends.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import statistics
import time
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import optuna
from sklearn.linear_model import Ridge
from sklearn.preprocessing import OneHotEncoder
from statsmodels.stats.proportion import proportion_confint

from prism import Schedule
from search.analysis.blocked import many_to_one
from search.analysis.summary import best_by_mean, study_runs
from search.analysis.verdict import decide
from search.attrs import SCHEDULE, SEED
from search.config import StudyConfig
from search.families import ScheduleFamily
from search.storage.records import stored_config
from search.study.pruning import budget_tokens
from search.study.samplers import make_sampler

UNIFORM, MARGIN, BASELINE_SEEDS, TOP, CONFIRM_SEEDS, SEARCH_SEED = "2x6", 0.01, 3, 5, 3, 0
CONFIRM_SEED0, FRESH_SEED0, MAX_RACE_SEEDS = 1000, 2000, 40  # seed numbers of confirmations, frozen pairs, LUCB
SAMPLERS = ("tpe", "gp", "random", "additive")
Runs = dict[tuple[str, int], float]


@dataclass(frozen=True)
class Fit:
    """What the simulator takes from bench-main: effects, seed-effect and residual sd, tokens of a run, its config."""

    effects: dict[str, float]
    seed_sd: float
    noise_sd: float
    full: int
    config: StudyConfig


def fit(db: str) -> Fit:
    """Schedule effects (uniform 0), the sd of seed effects and the residual sd from bench-main's blocked model."""
    study = optuna.load_study(study_name="bench-main", storage=f"sqlite:///{db}")
    config = stored_config(study)
    runs = study_runs(study.get_trials(deepcopy=False), config)
    family = many_to_one(runs, UNIFORM)
    effects = {UNIFORM: 0.0} | {g.schedule: g.contrast.mean for g in family.gaps}
    seeds = sorted({seed for _, seed in runs})
    seed_means = [statistics.fmean(runs[(s, seed)] - effects[s] for s in effects if (s, seed) in runs) for seed in seeds]
    assert family.sd_pair is not None
    return Fit(effects, statistics.stdev(seed_means), family.sd_pair / math.sqrt(2), budget_tokens(config)[1], config)


class Additive:
    """A ridge fit of effects on one indicator per (layer, head count): the structure the scenarios favour or not."""

    def __init__(self, effects: dict[str, float], counts: list[int]):
        schedules = sorted(effects)
        self.encoder = OneHotEncoder(categories=[counts] * len(Schedule.parse(UNIFORM).heads), handle_unknown="ignore")
        x = self.encoder.fit_transform([Schedule.parse(s).heads for s in schedules])
        y = [effects[s] for s in schedules]
        self.model = Ridge(alpha=1e-3).fit(x, y)
        self.r2 = float(self.model.score(x, y))
        self.residual_sd = float(np.std(y - self.model.predict(x), ddof=1))

    def predict(self, schedules: list[str]) -> np.ndarray:
        return self.model.predict(self.encoder.transform([Schedule.parse(s).heads for s in schedules]))


@dataclass(frozen=True)
class Scenario:
    """A family's schedules and how replicate r's effects are drawn (fixed ones, or with an interaction term)."""

    name: str
    family: ScheduleFamily
    base: np.ndarray  # effects, in family.enumerate() order
    interaction_sd: float = 0.0

    @property
    def schedules(self) -> list[str]:
        return [str(s) for s in self.family.enumerate()]

    def effects(self, rng: np.random.Generator) -> np.ndarray:
        if not self.interaction_sd:
            return self.base
        effects = self.base + self.interaction_sd * rng.standard_normal(len(self.base))
        return effects - effects[self.schedules.index(UNIFORM)]


class World:
    """One replicate of one scenario: every (schedule, seed) has a fixed value, all drawn at once from the replicate
    number, so every arm meets the same runs."""

    def __init__(self, scenario: Scenario, fitted: Fit, replicate: int, seed_scale: float = 1.0, noise_scale: float = 1.0):
        rng = np.random.default_rng([replicate])
        self.schedules = scenario.schedules
        self.index = {s: i for i, s in enumerate(self.schedules)}
        self.effects = scenario.effects(rng)
        self.truth = self.schedules[int(np.argmin(self.effects))]
        seeds = [*range(MAX_RACE_SEEDS), *range(CONFIRM_SEED0, CONFIRM_SEED0 + 20), *range(FRESH_SEED0, FRESH_SEED0 + 20)]
        self.slot = {seed: k for k, seed in enumerate(seeds)}
        luck = seed_scale * fitted.seed_sd * rng.standard_normal(len(seeds))
        noise = noise_scale * fitted.noise_sd * rng.standard_normal((len(self.schedules), len(seeds)))
        self.values = 2.0 + self.effects[:, None] + luck[None, :] + noise

    def value(self, schedule: str, seed: int) -> float:
        return float(self.values[self.index[schedule], self.slot[seed]])


def search(world: World, scenario: Scenario, fitted: Fit, sampler: str, replicate: int, n: int, explore: float) -> list[str]:
    """The distinct schedules the product's sampler proposes, in order, told their values at the search seed."""
    s = fitted.config.search.model_copy(update={"sampler": sampler, "explore": explore})
    config = fitted.config.model_copy(update={"seed": replicate, "search": s})
    study = optuna.create_study(sampler=make_sampler(config, scenario.family))
    family = scenario.family
    # the product trains search trials at the study seed (the replicate here): the world's search seed
    study.enqueue_trial(family.params_for(Schedule.parse(UNIFORM)), user_attrs={SCHEDULE: UNIFORM, SEED: config.seed})
    order: list[str] = []
    while len(order) < n and len(order) < len(world.schedules) - 1:
        trial = study.ask()
        schedule = str(family.suggest(trial))
        trial.set_user_attr(SCHEDULE, schedule)
        trial.set_user_attr(SEED, config.seed)
        study.tell(trial, world.value(schedule, SEARCH_SEED))
        if schedule != UNIFORM and schedule not in order:
            order.append(schedule)
        elif trial.number > 4 * len(world.schedules):
            break  # the sampler keeps serving taken schedules: the space is as searched as it gets
    return order


def _train(runs: Runs, world: World, schedule: str, seed: int) -> None:
    runs[(schedule, seed)] = world.value(schedule, seed)


def today(world: World, order: list[str], n_search: int) -> tuple[Runs, dict[str, set[int]]]:
    runs: Runs = {}
    for seed in range(BASELINE_SEEDS):
        _train(runs, world, UNIFORM, seed)
    for schedule in order[:n_search]:
        _train(runs, world, schedule, SEARCH_SEED)
    top = [g.schedule for g in many_to_one(runs, UNIFORM).gaps][:TOP]
    for schedule in [UNIFORM, *top]:
        for k in range(CONFIRM_SEEDS):
            _train(runs, world, schedule, CONFIRM_SEED0 + k)
    return runs, {s: {SEARCH_SEED} for s in order[:n_search]}


def lucb_target(runs: Runs) -> str | None:
    """The schedule LUCB to the control samples next: the study's best (its ranking: gaps shrunk by their noise) while
    its estimate is <= 0, else the lowest 95% lower bound below 0 (unmeasured: unbounded); None when no schedule may
    still beat uniform."""
    gaps = many_to_one(runs, UNIFORM).gaps
    if not gaps:
        return None
    if gaps[0].estimate <= 0:
        return gaps[0].schedule
    bounds = [(g.contrast.interval()[0] if g.contrast.measured else -math.inf, g.estimate, g.schedule) for g in gaps]
    low = min(bounds)
    return low[2] if low[0] < 0 else None


def lucb(world: World, order: list[str], n_search: int, total: int, fresh: int) -> tuple[Runs, dict[str, set[int]]]:
    runs: Runs = {}
    _train(runs, world, UNIFORM, SEARCH_SEED)
    for schedule in order[:n_search]:
        _train(runs, world, schedule, SEARCH_SEED)
    while (target := lucb_target(runs)) is not None:
        seed = next((k for k in range(1, MAX_RACE_SEEDS) if (target, k) not in runs), None)
        if seed is None or len(runs) + 1 + ((UNIFORM, seed) not in runs) + 2 * fresh > total:
            break
        for schedule in (UNIFORM, target):
            if (schedule, seed) not in runs:
                _train(runs, world, schedule, seed)
    selected: dict[str, set[int]] = {}
    for s, seed in runs:
        if s != UNIFORM:
            selected.setdefault(s, set()).add(seed)
    gaps = many_to_one(runs, UNIFORM).gaps
    if gaps:
        pick = gaps[0].schedule  # frozen: every seed from here on is fresh for it
        for k in range(fresh):
            _train(runs, world, UNIFORM, FRESH_SEED0 + k)
            _train(runs, world, pick, FRESH_SEED0 + k)
    return runs, selected


@dataclass(frozen=True)
class Outcome:
    runs: int
    right_pick: bool
    better_true: bool
    better_other: bool


def score(runs: Runs, selected: dict[str, set[int]], truth: str) -> Outcome:
    d = decide(runs, UNIFORM, selected, MARGIN)
    better = d.verdict.kind == "better"
    return Outcome(
        len(runs), best_by_mean(d.family, UNIFORM) == truth, better and d.verdict.schedule == truth, better and d.verdict.schedule != truth
    )


@dataclass(frozen=True)
class Task:
    scenario: Scenario
    sampler: str
    replicate: int


@dataclass(frozen=True)
class Settings:
    fitted: Fit
    n_search: int
    lucb_search: int
    lucb_runs: int
    lucb_fresh: int
    explore: float
    seed_scale: float
    noise_scale: float


SETTINGS: Settings | None = None  # set in each worker process


def _init(settings: Settings) -> None:
    global SETTINGS
    SETTINGS = settings
    optuna.logging.set_verbosity(optuna.logging.ERROR)


def replicate(task: Task) -> tuple[Task, Outcome, Outcome]:
    """One replicate of one sampler in one scenario: one search, both confirmations."""
    st = SETTINGS
    assert st is not None
    world = World(task.scenario, st.fitted, task.replicate, st.seed_scale, st.noise_scale)
    n = max(st.n_search, st.lucb_search)
    order = search(world, task.scenario, st.fitted, task.sampler, task.replicate, n, st.explore)
    arms = today(world, order, st.n_search), lucb(world, order, st.lucb_search, st.lucb_runs, st.lucb_fresh)
    first, second = (score(runs, selected, world.truth) for runs, selected in arms)
    return task, first, second


def scenarios(fitted: Fit, planted: dict[str, float]) -> list[Scenario]:
    """The scenarios of the module's docstring, each naming the schedule it plants in."""
    family = fitted.config.family
    names = [str(s) for s in family.enumerate()]
    base = np.array([fitted.effects[s] for s in names])
    additive = Additive(fitted.effects, family.counts)
    predicted = dict(zip(names, additive.predict(names), strict=True))
    others = [s for s in names if s != UNIFORM]
    favoured = min(others, key=predicted.__getitem__)
    single_early = [s for s in others if Schedule.parse(s).heads[0] == family.counts[0]]
    disfavoured = max(single_early or others, key=predicted.__getitem__)

    def plant(effects: dict[str, float]) -> np.ndarray:
        unknown = set(effects) - set(names)
        if unknown:
            raise SystemExit(f"--plant: {sorted(unknown)} not in the {family.name!r} space of bench-main ({len(names)} schedules)")
        return np.array([effects.get(s, fitted.effects[s]) for s in names])

    data = fitted.config.model_dump()
    data["space"] |= {"family": "free"}
    free = StudyConfig.model_validate(data).family  # parsed, so the space is resolved as the product resolves it
    free_names = [str(s) for s in free.enumerate()]
    free_base = additive.predict(free_names)
    out = [Scenario("fitted (uniform best)", family, base)]
    out += [
        Scenario(f"{where} {schedule} {effect:+g}", family, plant({schedule: effect}))
        for where, schedule in (("favoured", favoured), ("disfavoured", disfavoured))
        for effect in (-0.005, -0.01)
    ]
    out.append(
        Scenario(
            f"free ({len(free_names)} schedules, interaction sd {additive.residual_sd:.4f})",
            free,
            free_base - free_base[free_names.index(UNIFORM)],
            additive.residual_sd,
        )
    )
    if planted:
        out.append(Scenario("planted " + ",".join(f"{s}={e:+g}" for s, e in planted.items()), family, plant(planted)))
    print(
        f"additive model of bench-main's effects (one indicator per layer and head count, ridge): R^2 {additive.r2:.2f}, "
        f"residual sd {additive.residual_sd:.4f}; it ranks {favoured} best ({predicted[favoured]:+.4f}) and {disfavoured} "
        f"worst of those that start with {family.counts[0]} head ({predicted[disfavoured]:+.4f}, "
        f"rank {sorted(others, key=predicted.__getitem__).index(disfavoured) + 1} of {len(others)})"
    )
    return out


def rate(hits: Iterable[bool]) -> str:
    """Share and its 95% Wilson interval (binomial over replicates)."""
    values = list(hits)
    k, n = sum(values), len(values)
    low, high = proportion_confint(k, n, alpha=0.05, method="wilson")
    return f"{k / n:.1%} [{low:.1%}, {high:.1%}]"


def run(settings: Settings, tasks: list[Task], workers: int) -> dict[tuple[str, str, str], list[Outcome]]:
    """Every task's outcomes by (scenario, sampler, confirmation), in one process or a pool of `workers`."""
    results: dict[tuple[str, str, str], list[Outcome]] = {}

    def collect(outcomes: Iterable[tuple[Task, Outcome, Outcome]]) -> dict[tuple[str, str, str], list[Outcome]]:
        for task, first, second in outcomes:
            results.setdefault((task.scenario.name, task.sampler, "today"), []).append(first)
            results.setdefault((task.scenario.name, task.sampler, "lucb"), []).append(second)
        return results

    if workers == 1:
        _init(settings)
        return collect(map(replicate, tasks))
    with multiprocessing.Pool(workers, initializer=_init, initargs=(settings,)) as pool:
        return collect(pool.imap(replicate, tasks, chunksize=4))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--db", default="docs/results/bench.db")
    p.add_argument("--replicates", type=int, default=1000, help="paired replicates per arm and scenario")
    p.add_argument("--gp-replicates", type=int, default=None, help="fewer for gp, whose proposals cost the most")
    p.add_argument("--samplers", nargs="+", choices=SAMPLERS, default=list(SAMPLERS))
    p.add_argument("--scenarios", nargs="+", default=None, help="run only scenarios whose name starts with one of these")
    p.add_argument("--plant", action="append", default=[], metavar="SCHEDULE=EFFECT", help="a 'planted' scenario (repeatable)")
    p.add_argument("--seed-noise-scale", type=float, default=1.0, help="multiplies the fitted sd of seed effects")
    p.add_argument("--residual-noise-scale", type=float, default=1.0, help="multiplies the fitted residual sd")
    p.add_argument("--search", type=int, default=20, help="proposals today's search trains at the search seed")
    p.add_argument("--lucb-search", type=int, default=10, help="proposals before LUCB")
    p.add_argument("--lucb-runs", type=int, default=None, help="the LUCB arm's runs in all (default: half of today's)")
    p.add_argument("--lucb-fresh", type=int, default=3, help="fresh pairs after the pick is frozen")
    p.add_argument("--explore", type=float, default=0.25, help="the additive sampler's share of random proposals")
    p.add_argument("--workers", type=int, default=1, help="processes (the machine is shared: 1 by default)")
    args = p.parse_args(argv)
    planted = {}
    for text in args.plant:
        schedule, _, effect = text.partition("=")
        try:
            planted[str(Schedule.parse(schedule))] = float(effect)
        except ValueError:
            raise SystemExit(f"--plant {text!r}: expected SCHEDULE=EFFECT, e.g. 1x1,2x5=-0.01") from None
    fitted = fit(args.db)
    today_runs = BASELINE_SEEDS + args.search + (TOP + 1) * CONFIRM_SEEDS
    lucb_runs = args.lucb_runs if args.lucb_runs is not None else today_runs // 2
    if 1 + args.lucb_search + 2 * args.lucb_fresh > lucb_runs:
        raise SystemExit(f"--lucb-runs {lucb_runs}: fewer than uniform, --lucb-search and 2 x --lucb-fresh need")
    print(
        f"fitted to bench-main: {len(fitted.effects)} schedules, seed-effect sd {fitted.seed_sd:.4f} (x{args.seed_noise_scale:g}), "
        f"residual sd {fitted.noise_sd:.4f} (x{args.residual_noise_scale:g}); a run is {fitted.full / 1e6:.2f} M tokens"
    )
    print(
        f"today: {BASELINE_SEEDS} baselines + {args.search} proposals + top {TOP} and uniform x {CONFIRM_SEEDS} seeds = "
        f"{today_runs} runs; lucb: uniform + {args.lucb_search} proposals + LUCB + {args.lucb_fresh} frozen pairs <= {lucb_runs} runs; "
        f"additive explore share {args.explore:g}"
    )
    chosen = [s for s in scenarios(fitted, planted) if args.scenarios is None or any(s.name.startswith(w) for w in args.scenarios)]
    settings = Settings(
        fitted, args.search, args.lucb_search, lucb_runs, args.lucb_fresh, args.explore, args.seed_noise_scale, args.residual_noise_scale
    )
    counts = {s: (args.gp_replicates if s == "gp" and args.gp_replicates is not None else args.replicates) for s in args.samplers}
    print(
        "| scenario | sampler | confirmation | replicates | M tokens | best by ranking = true best "
        "| 'better' for the true best | 'better' for another | s per search |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for sc in chosen:  # one group at a time, each printed as it ends: a long run's finished rows are not lost
        for sampler in args.samplers:
            started = time.perf_counter()
            results = run(settings, [Task(sc, sampler, r) for r in range(counts[sampler])], args.workers)
            cost = (time.perf_counter() - started) / counts[sampler]
            for rule in ("today", "lucb"):
                out = results[(sc.name, sampler, rule)]
                tokens = statistics.fmean(o.runs for o in out) * fitted.full / 1e6
                shares = " | ".join(rate(getattr(o, f) for o in out) for f in ("right_pick", "better_true", "better_other"))
                print(f"| {sc.name} | {sampler} | {rule} | {len(out)} | {tokens:.1f} | {shares} | {cost:.2f} |", flush=True)


if __name__ == "__main__":
    main()
