"""Compute to a correct verdict: search-then-confirm (today) against racing, with and without automatic pruning.

    .venv/bin/python scripts/bench_racing.py                       # 200 replicates per scenario and strategy
    .venv/bin/python scripts/bench_racing.py --replicates 50       # quicker

The simulator: final val loss(schedule, seed) = schedule effect + seed effect + noise, with the 28 schedule effects,
the spread of the seed effects and the residual sd estimated from bench-main (docs/results/bench.db) by the
product's own blocked model. Learning curves come from the real ones: a simulated run takes a complete curve that
bench-main trained for the same schedule (at any of its seeds, drawn at random for each simulated run) and shifts it
so that its final value is the simulated one. The shapes are real, so an early evaluation ranks runs as badly or as
well as bench-main's did. Scenarios: the fitted effects (uniform is the true best: "better" is never right), and the
same with one schedule (`2x2,4x4`) planted 0.005 or 0.01 better than uniform (then it is the true best, and "better"
for it is the right verdict). Replicate r draws its seed effects, its noise and curve for each (schedule, seed), and
the order in which the search proposes schedules (a sampler that learns nothing) from r alone, so every strategy
meets the same runs: the comparison is paired.

Strategies, one worker, budgets and costs in training tokens (a complete run is 2.05 M):
- today: uniform at 3 baseline seeds, the search trains N schedules at the search seed, then `confirm --top 5
  --seeds 3` trains the top 5 by mean and uniform on 3 fresh seeds; nothing is pruned (bench-main's config);
- racing: the same baselines; after every run the product's race (search.analysis.racing.decide) names the runs to
  queue (paired seeds for challengers within the margin), which run before the next proposal, while a complete
  run fits in the budget;
- racing + auto pruning: the same, with `min_resource_evals = "auto"` on bench-main's successive-halving rungs
  (search.study.pruning.rungs; reduction factor 3 from its stored config). Before each search trial the gate's start
  is estimated as the product does (search.analysis.fidelity.pruning_start on the complete curves so far); from
  there on a search trial is cut at a rung when it is not in the best 1/3 of the values at that rung of the runs at
  its seed that reached it (search.study.pruning.promotable). This approximates Optuna's successive halving, which
  compares all trials at a rung whatever their seed and runs concurrently. A cut trial costs the tokens up to its
  rung and has no final value: it counts in neither the race nor the verdict. Race runs and baselines are never cut;
- variant, breadth first: uniform at the search seed only; new schedules at the search seed until half the budget,
  then one more paired seed at a time (uniform first where it lacks it) for the schedule with the best paired mean
  gap to uniform while that gap is below 0, up to 8 seeds; new schedules again when no such schedule is left. The
  incumbent is always uniform (no incumbent switch); with and without auto pruning of its search trials.
All end with the product's verdict (search.analysis.verdict.decide, margin 0.01). Reported: tokens spent (mean, and
the 5th-95th percentile over replicates), how often the best schedule by mean is the true best, how often "better" is
claimed for the true best, and how often for a schedule that is not (replicates, share, 95% Wilson interval).
"""

from __future__ import annotations

import argparse
import math
import statistics
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import optuna
from statsmodels.stats.proportion import proportion_confint

from search.analysis.blocked import many_to_one
from search.analysis.fidelity import Curve, pruning_start
from search.analysis.racing import Run
from search.analysis.racing import decide as race
from search.analysis.summary import best_by_mean, fidelity, full_curves, paired_diffs, study_runs
from search.analysis.verdict import decide
from search.storage.records import stored_config
from search.study.pruning import budget_tokens, promotable, rungs

UNIFORM, PLANTED, MARGIN, BASELINE_SEEDS, TOP, CONFIRM_SEEDS, MAX_SEEDS = "2x6", "2x2,4x4", 0.01, 3, 5, 3, 8
SEARCH_SEED = 0


@dataclass(frozen=True)
class Fit:
    """What the simulator takes from bench-main: effects, seed-effect and residual sd, real curves, the rungs."""

    effects: dict[str, float]
    seed_sd: float
    noise_sd: float
    curves: dict[str, list[Curve]]  # schedule -> its complete real curves
    rungs: list[int]  # successive-halving rung budgets (tokens) under min_resource_evals = "auto"
    eta: int
    full: int  # tokens of a complete run


def fit(db: str) -> Fit:
    """Schedule effects (uniform 0), the sd of seed effects and the residual sd from bench-main's blocked model; its
    complete curves by schedule; and its rungs as the product would set them with `min_resource_evals = "auto"`."""
    study = optuna.load_study(study_name="bench-main", storage=f"sqlite:///{db}")
    trials = study.get_trials(deepcopy=False)
    config = stored_config(study)
    runs = study_runs(trials, config)
    family = many_to_one(runs, UNIFORM)
    effects = {UNIFORM: 0.0} | {g.schedule: g.contrast.mean for g in family.gaps}
    seeds = sorted({seed for _, seed in runs})
    seed_means = [statistics.fmean(runs[(s, seed)] - effects[s] for s in effects if (s, seed) in runs) for seed in seeds]
    assert family.sd_pair is not None
    curves: dict[str, list[Curve]] = {}
    for c in full_curves(trials):
        curves.setdefault(c.schedule, []).append(c)
    auto = config.model_copy(update={"search": config.search.model_copy(update={"min_resource_evals": "auto"})})
    sd = family.sd_pair / math.sqrt(2)
    return Fit(effects, statistics.stdev(seed_means), sd, curves, rungs(auto), auto.search.reduction_factor, budget_tokens(auto)[1])


def shifted(curve: Curve, final: float) -> Curve:
    """`curve` moved up or down so that it ends at `final`: its shape (every step between evaluations) is kept."""
    shift = final - curve.final
    return Curve(curve.schedule, curve.seed, {t: v + shift for t, v in curve.points.items()}, final)


class World:
    """One replicate of one scenario: every (schedule, seed) has a fixed final value and curve, drawn from the
    replicate number alone, so that every strategy meets the same runs."""

    def __init__(self, effects: dict[str, float], fitted: Fit, replicate: int):
        self.effects, self.fit, self.replicate = effects, fitted, replicate
        self.index = {s: i for i, s in enumerate(sorted(effects))}

    def order(self) -> list[str]:
        """The order in which the search proposes schedules other than uniform."""
        others = sorted(s for s in self.effects if s != UNIFORM)
        return [others[i] for i in np.random.default_rng([self.replicate]).permutation(len(others))]

    def train(self, schedule: str, seed: int) -> Curve:
        luck = self.fit.seed_sd * np.random.default_rng([self.replicate, seed]).standard_normal()
        rng = np.random.default_rng([self.replicate, seed, 1 + self.index[schedule]])
        final = 2.0 + self.effects[schedule] + luck + self.fit.noise_sd * rng.standard_normal()
        real = self.fit.curves[schedule]
        picked = real[int(rng.integers(len(real)))]
        return shifted(Curve(schedule, seed, picked.points, picked.final), final)


def cut_at(curve: Curve, rung_budgets: Sequence[int], at_rung: dict[int, list[float]], start: int | None, eta: int) -> int | None:
    """The tokens at which successive halving cuts this run, or None: at each rung, the run's first evaluation at or
    past it is entered among `at_rung` (the values there of the runs at its seed that reached it) and, from the gate's
    `start` on, the run is cut unless it is in their best 1/eta (Optuna's rule, search.study.pruning.promotable)."""
    for rung in rung_budgets:
        tokens = min(t for t in curve.points if t >= rung)
        others = at_rung.setdefault(rung, [])
        keep = start is None or tokens < start or promotable(curve.points[tokens], list(others), eta)
        others.append(curve.points[tokens])
        if not keep:
            return tokens
    return None


@dataclass
class Study:
    """A one-worker study in one world: final values, complete curves, each seed's values at each rung, tokens."""

    world: World
    auto_pruning: bool
    runs: dict[tuple[str, int], float] = field(default_factory=dict)
    curves: list[Curve] = field(default_factory=list)
    selected: dict[str, set[int]] = field(default_factory=dict)  # schedule -> seeds its search trials completed at
    at_rung: dict[int, dict[int, list[float]]] = field(default_factory=dict)  # seed -> rung -> values
    spent: int = 0
    cut: int = 0
    _start: tuple[int, int | None] = (-1, None)  # (complete curves it was read from, the gate's start)

    def train(self, schedule: str, seed: int, search: bool = False) -> None:
        """Train one run; a search trial may be cut when auto pruning is on."""
        curve = self.world.train(schedule, seed)
        fitted = self.world.fit
        start = self.gate() if search and self.auto_pruning else None
        tokens = cut_at(curve, fitted.rungs, self.at_rung.setdefault(seed, {}), start, fitted.eta)
        if tokens is not None:
            self.spent += tokens
            self.cut += 1
            return
        self.spent += fitted.full
        self.runs[(schedule, seed)] = curve.final
        self.curves.append(curve)
        if search:
            self.selected.setdefault(schedule, set()).add(seed)

    def affords(self, budget: float) -> bool:
        """Another complete run fits in `budget`: no strategy spends more than it was given."""
        return self.spent + self.world.fit.full <= budget

    def gate(self) -> int | None:
        """Where pruning may start, read as the product does from the complete curves (re-read as runs finish)."""
        if self._start[0] != len(self.curves):
            best = best_by_mean(many_to_one(self.runs, UNIFORM), UNIFORM)
            rung = pruning_start(fidelity(tuple(self.curves), self.world.fit.eta, best))
            self._start = (len(self.curves), rung.tokens if rung else None)
        return self._start[1]


def today(study: Study, order: list[str], n_search: int) -> None:
    for seed in range(BASELINE_SEEDS):
        study.train(UNIFORM, seed)
    for schedule in order[:n_search]:
        study.train(schedule, SEARCH_SEED, search=True)
    top = [g.schedule for g in many_to_one(study.runs, UNIFORM).gaps][:TOP]
    for schedule in [UNIFORM, *top]:
        for k in range(CONFIRM_SEEDS):
            study.train(schedule, 1000 + k)


def racing(study: Study, order: list[str], budget: float) -> None:
    for seed in range(BASELINE_SEEDS):
        study.train(UNIFORM, seed)
    proposals = iter(order)
    while study.affords(budget):
        queue = race([Run(s, seed, v) for (s, seed), v in study.runs.items()], UNIFORM, range(MAX_SEEDS), MARGIN).queue
        if queue:
            study.train(*queue[0])
        elif (schedule := next(proposals, None)) is not None:
            study.train(schedule, SEARCH_SEED, search=True)
        else:
            break


def leader_run(runs: dict[tuple[str, int], float], seeds: Sequence[int]) -> tuple[str, int] | None:
    """The variant's next race run: for the schedule with the best paired mean gap to uniform, while that gap is
    below 0 and it has fewer than len(seeds) seeds, its next seed (uniform's run there first, if missing)."""
    gaps = {s: paired_diffs(runs, s, UNIFORM, seeds) for s, _ in runs if s != UNIFORM}
    for schedule in sorted((s for s in gaps if gaps[s]), key=lambda s: statistics.fmean(gaps[s])):
        if statistics.fmean(gaps[schedule]) >= 0:
            return None
        seed = next((seed for seed in seeds if (schedule, seed) not in runs), None)
        if seed is not None:
            return (UNIFORM, seed) if (UNIFORM, seed) not in runs else (schedule, seed)
    return None


def breadth_first(study: Study, order: list[str], budget: float) -> None:
    study.train(UNIFORM, SEARCH_SEED)
    proposals: Iterator[str] = iter(order)
    proposal = next(proposals, None)
    while study.affords(budget):
        run = leader_run(study.runs, range(MAX_SEEDS)) if study.spent >= budget / 2 or proposal is None else None
        if run is not None:
            study.train(*run)
        elif proposal is not None:
            study.train(proposal, SEARCH_SEED, search=True)
            proposal = next(proposals, None)
        else:
            break


def score(study: Study, truth: str) -> tuple[bool, bool, bool]:
    """(best by mean is the true best, "better" claimed for the true best, "better" claimed for another schedule)."""
    d = decide(study.runs, UNIFORM, study.selected, MARGIN)
    better = d.verdict.kind == "better"
    return best_by_mean(d.family, UNIFORM) == truth, better and d.verdict.schedule == truth, better and d.verdict.schedule != truth


def rate(hits: list[bool]) -> str:
    """Count of replicates, share and its 95% Wilson interval (binomial over replicates)."""
    k, n = sum(hits), len(hits)
    low, high = proportion_confint(k, n, alpha=0.05, method="wilson")
    return f"{k}: {k / n:.1%} [{low:.1%}, {high:.1%}]"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--db", default="docs/results/bench.db")
    p.add_argument("--replicates", type=int, default=200)
    p.add_argument("--search", type=int, default=20, help="schedules today's search trains at the search seed")
    args = p.parse_args()
    fitted = fit(args.db)
    print(
        f"fitted to bench-main: {len(fitted.effects)} schedules, seed-effect sd {fitted.seed_sd:.4f}, residual sd "
        f"{fitted.noise_sd:.4f}; {sum(map(len, fitted.curves.values()))} real curves; rungs at {fitted.rungs} tokens, "
        f"reduction factor {fitted.eta}\n"
    )
    full = (BASELINE_SEEDS + args.search + (TOP + 1) * CONFIRM_SEEDS) * fitted.full
    strategies: dict[str, tuple[bool, Callable[[Study, list[str]], None]]] = {
        f"today (search {args.search}, confirm top {TOP} x {CONFIRM_SEEDS})": (False, lambda st, o: today(st, o, args.search)),
        "racing, half the tokens": (False, lambda st, o: racing(st, o, full / 2)),
        "racing, the same tokens": (False, lambda st, o: racing(st, o, full)),
        "racing + auto pruning, half": (True, lambda st, o: racing(st, o, full / 2)),
        "racing + auto pruning, same": (True, lambda st, o: racing(st, o, full)),
        "variant: breadth first, half": (False, lambda st, o: breadth_first(st, o, full / 2)),
        "variant + auto pruning, half": (True, lambda st, o: breadth_first(st, o, full / 2)),
    }
    print(
        "| scenario | strategy | M tokens: mean (5-95%) | search trials cut | best by mean = true best "
        "| 'better' for the true best | 'better' for another |"
    )
    print("|---|---|---:|---:|---:|---:|---:|")
    for name, planted in (("fitted (uniform best)", None), ("2x2,4x4 planted -0.005", -0.005), ("2x2,4x4 planted -0.01", -0.01)):
        scenario = fitted.effects | ({PLANTED: planted} if planted is not None else {})
        truth = min(scenario, key=scenario.__getitem__)
        for label, (auto, strategy) in strategies.items():
            results, spent, cut = [], [], []
            for replicate in range(args.replicates):
                world = World(scenario, fitted, replicate)
                study = Study(world, auto)
                strategy(study, world.order())
                spent.append(study.spent / 1e6)
                cut.append(study.cut)
                results.append(score(study, truth))
            low, high = np.percentile(spent, [5, 95])
            rates = " | ".join(rate([r[i] for r in results]) for i in range(3))
            tokens = f"{statistics.fmean(spent):.0f} ({low:.0f}-{high:.0f})"
            print(f"| {name} | {label} | {tokens} | {statistics.fmean(cut):.1f} | {rates} |", flush=True)


if __name__ == "__main__":
    main()
