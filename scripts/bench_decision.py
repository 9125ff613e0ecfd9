"""Compute to a correct decision: arms (a sampler and a confirmation) judged against the yardstick on the same runs.

    .venv/bin/python scripts/bench_decision.py --replicates 300 --scenarios fitted      # every arm, one scenario
    .venv/bin/python scripts/bench_decision.py --samplers random --confirmations "b1 n19 top3 r1 k1 s3 pooled"
    .venv/bin/python scripts/bench_decision.py --plant 1x1,2x5=-0.02 --scenarios planted --residual-noise-scale 2
    .venv/bin/python scripts/bench_decision.py --db docs/results/control.db --study control-all --scenarios fitted

The last fits the simulator to the positive control's real runs (studies/control-all.toml: every schedule of its
family at 3 paired seeds), where one schedule truly wins by far more than the margin; every other line fits it to
bench-main, where uniform is the best. Below, "bench-main" stands for the study fitted.

The simulator: final val loss(schedule, seed) = 2 + schedule effect + seed effect + residual, with the 28 schedule
effects, the sd of the seed effects and the residual sd estimated from bench-main (docs/results/bench.db) by the
product's blocked model (search.analysis.blocked). Replicate r draws every seed effect and residual from r alone, as
one matrix (schedule x seed), so every arm meets the same runs: the comparison is paired. Seed effects cannot change
a decision (paired differences and the blocked model cancel them, and a sampler sees one seed, shifted as a whole);
the residual is the noise that matters, and `--residual-noise-scale` scales it.

Scenarios (the schedule effects; the true best is the schedule with the lowest effect, uniform when none is below 0):
- global null: every schedule exactly as good as uniform: every "better" is false;
- fitted: bench-main's fitted effects; uniform is the true best, so "better" is never right;
- favoured -0.005 / -0.01: the fitted effects with a winner planted at that effect in the schedule other than uniform
  that an additive model of per-layer head counts (fitted to the effects) ranks best: a search that trusts the
  structure walks towards it;
- disfavoured -0.005 / -0.01: the same in the schedule that starts with a single head (the fewest heads in the
  first layer) which the model ranks worst among those: a search that trusts the structure walks away from it;
- free: the `free` family over bench-main's head counts (K^L schedules), effects = the additive model fitted to
  bench-main's effects (one coefficient per layer and head count) plus an interaction term drawn per replicate with
  the sd of that fit's residuals, uniform's set to 0; scored by regret, not by the exact pick;
- planted: every `--plant SCHEDULE=EFFECT` applied to the fitted effects, or to the free scenario's when a planted
  schedule is not monotone (any member of the free family may be planted).

An arm is a sampler (`tpe`, `gp`, `random`, `additive`: the product's own, search.study.samplers.make_sampler, seeded
by the replicate) and a confirmation, written as words (`Confirmation.parse`): `bB` uniform baselines (seeds 0 ..
B-1; 0 is the search seed, where uniform is the first trial), `nN` proposals trained at the search seed, `topT` the
confirmation starts with the top T by the study's ranking (paired gaps shrunk by their noise), `rR` elimination
rounds (each trains uniform and the contenders at one new seed, then keeps the better half by the ranking), `kK` the
best K after the rounds go on (all when absent), `sS` they and uniform train S new seeds, `pooled` tests them with the
residual variance pooled over every run of the study, `hP` the search seed's runs train P percent of the steps (they
cost that share of a run; what they read is the final loss plus an error whose sd makes the two correlate within a
seed as bench-main's curves do at that rung: Fit.horizon_sd). Today's default is `b3 n20 top5 s3` (41 runs); the yardstick
is TPE with it. Every sampler searched is told only its search seed's runs, so one search per sampler and replicate
serves all its confirmations. A proposal of a schedule already trained at the search seed (the space ran short) is
served as the duplicate cache serves it: no run, no tokens.

The verdict on the last stage (`Confirmation.run`): every seed a schedule ran before it (the search seed, the
rounds) counts as one it was selected on, so *better* rests on the last stage's seeds alone:
- without `pooled`: the product's verdict (search.analysis.verdict.decide, margin 0.01): the blocked model over the
  last stage's runs, Holm over its schedules;
- with `pooled`: each last-stage schedule's runs are relabelled as a schedule of their own, and the blocked model is
  fitted to every run of the study: a relabelled schedule's contrast is its mean paired gap on the last stage's seeds
  (only uniform shares those seeds), its se the residual sd pooled over every schedule and seed (more df than its
  own S - 1), Holm over the last stage's schedules. Why it keeps the error rate: under the blocked model (one residual
  variance, additive seed effects) the residuals are independent of every fitted value, so of whatever the search
  and the rounds selected on, and the last stage's seeds are new draws; a run selected for its luck at the search
  seed tends to inflate the residuals it enters, toward a conservative test. The global null row measures it.

Reported per scenario and arm, on the same replicates as the yardstick: training tokens (mean; a complete run is
2.05 M) and their share of the yardstick's; the right pick (the best by the study's ranking is the true best; uniform
when none is below 0), "better" for a truly better schedule (the planted winner where there is one), false "better"
(for a schedule not better than uniform, with its 95% Wilson interval), each with its paired difference to the
yardstick with a 95% interval (Newcombe's hybrid score interval for paired proportions); the regret (true effect of
the pick minus the best true effect) with its paired difference (t interval over replicates); and whether the arm
passes the scenario (`passes`). Rows are printed as each scenario ends, then each arm's "better" as a ratio to the
yardstick's (a bootstrap over replicates) where the yardstick has any.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import re
import statistics
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import optuna
from scipy.special import stdtrit
from sklearn.linear_model import Ridge
from sklearn.preprocessing import OneHotEncoder
from statsmodels.stats.proportion import proportion_confint

from prism import Schedule
from search.analysis.blocked import many_to_one
from search.analysis.fidelity import rung_fidelity
from search.analysis.stats import ALPHA, holm
from search.analysis.summary import best_by_mean, full_curves, study_runs
from search.analysis.verdict import decide
from search.attrs import SCHEDULE, SEED
from search.config import StudyConfig
from search.families import ScheduleFamily
from search.storage.records import stored_config
from search.study.pruning import budget_tokens
from search.study.samplers import make_sampler

MARGIN, SEARCH_SEED, CONFIRM_SEED0, MAX_SEEDS = 0.01, 0, 1000, 40
SAMPLERS = ("tpe", "gp", "random", "additive")
TODAY = "b3 n20 top5 s3"
CONFIRMATIONS = (
    TODAY,
    "b1 n20 top5 s3",
    "b1 n20 top3 s3",
    "b1 n20 top2 s3 pooled",
    "b1 n21 top1 s4 pooled",
    "b1 n19 top3 r1 k1 s3",
    "b1 n19 top3 r1 k1 s3 pooled",
    "b1 n18 top4 r1 k1 s3 pooled",
    "b1 n17 top3 r1 k1 s4 pooled",
    "b1 n15 top3 r1 k1 s5 pooled",
    "b1 n15 top4 r2 k1 s3 pooled",
)
# the pass rule (paired differences to the yardstick, 95% intervals): right pick's lower bound, "better" for a truly
# better schedule's lower bound, false "better"'s upper bound; the free family's regret (loss) upper bound instead of
# the right pick: a tenth of the verdict's margin
PICK_MARGIN, BETTER_MARGIN, FALSE_MARGIN, REGRET_MARGIN, TOKEN_SHARE = -0.03, -0.02, 0.01, 0.001, 0.75
Runs = dict[tuple[str, int], float]
WORDS = {"b": "baselines", "n": "search", "top": "top", "r": "rounds", "k": "keep", "s": "seeds", "h": "horizon"}  # a confirmation's words
WORD_RANGE = {"r": range(0, 10**6), "h": range(1, 101)}  # the others: 1 and up


@dataclass(frozen=True)
class Fit:
    """What the simulator takes from a study's runs (bench-main by default): effects, seed-effect and residual sd,
    tokens of a run, its config."""

    study: str
    effects: dict[str, float]
    seed_sd: float
    noise_sd: float
    full: int
    config: StudyConfig
    within_sd: float = 0.0  # sd of the final val losses about their seed's mean
    fidelity: tuple[tuple[int, float], ...] = ()  # (percent of the steps, within-seed rho of the loss there with the final)

    @property
    def uniform(self) -> str:
        """The study's uniform baseline, every effect's zero."""
        return str(self.config.baseline)

    def horizon_sd(self, percent: int) -> float:
        """The error a run stopped at `percent` of its steps adds to its final loss, so that the two correlate within a
        seed as bench-main's curves do there: within_sd * sqrt(1 / rho^2 - 1) (rho read as a Pearson correlation)."""
        rho = dict(self.fidelity).get(percent)
        if rho is None or rho <= 0:
            measured = ", ".join(f"{p}% ({r:+.2f})" for p, r in self.fidelity)
            raise SystemExit(f"h{percent}: the search horizon must be one of bench-main's rungs that rank like the final: {measured}")
        return self.within_sd * math.sqrt(1 / rho**2 - 1)


def fit(db: str, name: str = "bench-main") -> Fit:
    """Schedule effects (uniform 0), the sd of seed effects and the residual sd from the study's blocked model."""
    study = optuna.load_study(study_name=name, storage=f"sqlite:///{db}")
    config = stored_config(study)
    uniform = str(config.baseline)
    runs = study_runs(study.get_trials(deepcopy=False), config)
    family = many_to_one(runs, uniform)
    effects = {uniform: 0.0} | {g.schedule: g.contrast.mean for g in family.gaps}
    seeds = sorted({seed for _, seed in runs})
    seed_means = [statistics.fmean(runs[(s, seed)] - effects[s] for s in effects if (s, seed) in runs) for seed in seeds]
    assert family.sd_pair is not None
    curves = full_curves(study.get_trials(deepcopy=False))
    last = max(max(c.points) for c in curves)
    rungs = rung_fidelity(curves, config.search.reduction_factor, None, n_boot=200) or []
    fidelity = tuple((round(100 * r.tokens / last), r.agreement.rho) for r in rungs)
    by_seed: dict[int, list[float]] = {}
    for c in curves:
        by_seed.setdefault(c.seed, []).append(c.final)
    within = [y - statistics.fmean(ys) for ys in by_seed.values() for y in ys]
    within_sd = math.sqrt(math.fsum(d * d for d in within) / (len(within) - len(by_seed)))
    sd_seed, sd_noise = statistics.stdev(seed_means), family.sd_pair / math.sqrt(2)
    return Fit(name, effects, sd_seed, sd_noise, budget_tokens(config)[1], config, within_sd, fidelity)


class Additive:
    """A ridge fit of effects on one indicator per (layer, head count): the structure the scenarios favour or not."""

    def __init__(self, effects: dict[str, float], counts: list[int], n_layer: int):
        schedules = sorted(effects)
        self.encoder = OneHotEncoder(categories=[counts] * n_layer, handle_unknown="ignore")
        x = self.encoder.fit_transform([Schedule.parse(s).heads for s in schedules])
        y = [effects[s] for s in schedules]
        self.model = Ridge(alpha=1e-3).fit(x, y)
        self.r2 = float(self.model.score(x, y))
        self.residual_sd = float(np.std(y - self.model.predict(x), ddof=1))

    def predict(self, schedules: list[str]) -> np.ndarray:
        return self.model.predict(self.encoder.transform([Schedule.parse(s).heads for s in schedules]))


@dataclass(frozen=True)
class Scenario:
    """A family's schedules and how replicate r's effects are drawn (fixed ones, or with an interaction term, then
    the planted ones)."""

    name: str
    family: ScheduleFamily
    uniform: str  # the baseline: its effect is 0
    base: np.ndarray  # effects, in family.enumerate() order
    interaction_sd: float = 0.0
    planted: tuple[tuple[str, float], ...] = ()
    by_regret: bool = False  # scored by regret: the exact best of a large family is no fair target

    @property
    def schedules(self) -> list[str]:
        return [str(s) for s in self.family.enumerate()]

    def effects(self, rng: np.random.Generator) -> np.ndarray:
        names = self.schedules
        effects = self.base.copy()
        if self.interaction_sd:
            effects = effects + self.interaction_sd * rng.standard_normal(len(effects))
            effects -= effects[names.index(self.uniform)]
        for schedule, effect in self.planted:
            effects[names.index(schedule)] = effect
        return effects


class World:
    """One replicate of one scenario: every (schedule, seed) has a fixed value, all drawn at once from the replicate
    number, so every arm meets the same runs. `seed_scale` multiplies the seed effects (tests show they change no
    decision)."""

    def __init__(self, scenario: Scenario, fitted: Fit, replicate: int, noise_scale: float = 1.0, seed_scale: float = 1.0):
        rng = np.random.default_rng([replicate])
        self.schedules = scenario.schedules
        self.uniform = scenario.uniform
        self.index = {s: i for i, s in enumerate(self.schedules)}
        self.effects = scenario.effects(rng)
        low = int(np.argmin(self.effects))
        self.truth = self.schedules[low] if self.effects[low] < 0 else self.uniform
        seeds = [*range(MAX_SEEDS), *range(CONFIRM_SEED0, CONFIRM_SEED0 + MAX_SEEDS)]
        self.slot = {seed: k for k, seed in enumerate(seeds)}
        luck = seed_scale * fitted.seed_sd * rng.standard_normal(len(seeds))
        noise = noise_scale * fitted.noise_sd * rng.standard_normal((len(self.schedules), len(seeds)))
        self.values = 2.0 + self.effects[:, None] + luck[None, :] + noise
        self.horizon_error = rng.standard_normal(len(self.schedules))  # drawn last: the values above stay as they were
        self.fitted = fitted

    def value(self, schedule: str, seed: int, horizon: int = 100) -> float:
        """The val loss of `schedule` at `seed`, read at `horizon` percent of the steps (the search seed's runs only)."""
        y = float(self.values[self.index[schedule], self.slot[seed]])
        if horizon == 100:
            return y
        assert seed == SEARCH_SEED, "only the search runs at a shorter horizon"
        return y + self.fitted.horizon_sd(horizon) * float(self.horizon_error[self.index[schedule]])

    def effect(self, schedule: str) -> float:
        return float(self.effects[self.index[schedule]])


def search(
    world: World, scenario: Scenario, fitted: Fit, sampler: str, replicate: int, n: int, explore: float, horizon: int = 100
) -> list[str]:
    """The distinct schedules the product's sampler proposes, in order, told their values at the search seed (read at
    `horizon` percent of the steps)."""
    s = fitted.config.search.model_copy(update={"sampler": sampler, "explore": explore})
    config = fitted.config.model_copy(update={"seed": replicate, "search": s})
    study = optuna.create_study(sampler=make_sampler(config, scenario.family))
    family = scenario.family
    # the product trains search trials at the study seed (the replicate here): the world's search seed
    uniform = world.uniform
    study.enqueue_trial(family.params_for(Schedule.parse(uniform)), user_attrs={SCHEDULE: uniform, SEED: config.seed})
    order: list[str] = []
    while len(order) < n and len(order) < len(world.schedules) - 1:
        trial = study.ask()
        schedule = str(family.suggest(trial))
        trial.set_user_attr(SCHEDULE, schedule)
        trial.set_user_attr(SEED, config.seed)
        study.tell(trial, world.value(schedule, SEARCH_SEED, horizon))
        if schedule != uniform and schedule not in order:
            order.append(schedule)
        elif trial.number > 4 * len(world.schedules):
            break  # the sampler keeps serving taken schedules: the space is as searched as it gets
    return order


@dataclass(frozen=True)
class Verdict:
    """What a confirmation decided: the study's pick (its ranking's best; uniform when none is below 0) and the schedule
    called better, if any."""

    runs: float  # in complete runs: a search run at a shorter horizon counts its share of the steps
    pick: str
    better: str | None


def ranking(runs: Runs, uniform: str) -> list[str]:
    return [g.schedule for g in many_to_one(runs, uniform).gaps]


@dataclass(frozen=True)
class Confirmation:
    """How a study spends its runs after the sampler's order is known (the module's docstring has the words)."""

    baselines: int = 3
    search: int = 20
    top: int = 5
    rounds: int = 0
    keep: int | None = None
    seeds: int = 3
    pooled: bool = False
    horizon: int = 100  # percent of the steps the search seed's runs train (the confirmation's always train them all)

    @classmethod
    def parse(cls, text: str) -> Confirmation:
        fields: dict[str, int | bool] = {}
        for word in text.split():
            if word == "pooled":
                fields["pooled"] = True
            elif (m := re.fullmatch(r"(top|b|n|r|k|s|h)(\d+)", word)) and int(m[2]) in WORD_RANGE.get(m[1], range(1, 10**6)):
                fields[WORDS[m[1]]] = int(m[2])
            else:
                raise SystemExit(f"--confirmations {text!r}: {word!r} is not one of bB nN topT rR kK sS hP pooled (e.g. {TODAY!r})")
        return cls(**fields)  # type: ignore[arg-type]

    def __str__(self) -> str:
        words = [f"b{self.baselines}", f"n{self.search}", f"top{self.top}"]
        words += [f"r{self.rounds}"] * bool(self.rounds) + [f"k{self.keep}"] * (self.keep is not None)
        return " ".join([*words, f"s{self.seeds}"] + [f"h{self.horizon}"] * (self.horizon != 100) + ["pooled"] * self.pooled)

    def runs_at_most(self) -> float:
        contenders, runs = self.top, (1 + self.search) * self.horizon / 100 + self.baselines - 1
        for _ in range(self.rounds):
            runs += contenders + 1
            contenders = math.ceil(contenders / 2)
        return runs + (min(contenders, self.keep or contenders) + 1) * self.seeds

    def run(self, world: World, order: Sequence[str]) -> Verdict:
        runs: Runs = {}
        cost = 0.0
        uniform = world.uniform

        def train(schedule: str, seed: int) -> None:
            nonlocal cost
            horizon = self.horizon if seed == SEARCH_SEED else 100
            runs[(schedule, seed)] = world.value(schedule, seed, horizon)
            cost += horizon / 100

        for seed in range(self.baselines):
            train(uniform, SEARCH_SEED + seed)
        for schedule in order[: self.search]:
            train(schedule, SEARCH_SEED)
        contenders, seed = ranking(runs, uniform)[: self.top], CONFIRM_SEED0
        for _ in range(self.rounds):
            for schedule in (uniform, *contenders):
                train(schedule, seed)
            seed += 1
            ranked = [s for s in ranking(runs, uniform) if s in contenders]
            contenders = ranked[: math.ceil(len(contenders) / 2)]
        last = contenders[: self.keep] if self.keep else contenders
        selected: dict[str, set[int]] = {}
        for s, ran in runs:
            if s != uniform:
                selected.setdefault(s, set()).add(ran)
        for k in range(self.seeds):
            for schedule in (uniform, *last):
                train(schedule, seed + k)
        pick = best_by_mean(many_to_one(runs, uniform), uniform)
        if self.pooled:
            return Verdict(cost, pick, pooled_better(runs, last, seed, uniform))
        d = decide(runs, uniform, selected, MARGIN)
        return Verdict(cost, pick, d.verdict.schedule if d.verdict.kind == "better" else None)


def pooled_better(runs: Runs, last: Sequence[str], first_seed: int, uniform: str) -> str | None:
    """The best-ranked of `last` that beats uniform on its runs from `first_seed` on, tested with the residual
    variance of the blocked model over every run (those runs relabelled as a schedule of their own), Holm over
    `last`."""
    fresh = {s: f"{s} (last stage)" for s in last}
    relabelled = {(fresh[s] if s in fresh and seed >= first_seed else s, seed): y for (s, seed), y in runs.items()}
    family = many_to_one(relabelled, uniform)
    gaps = [g for s in last if (g := family.gap(fresh[s])) is not None and g.contrast.measured]
    adjusted = holm([g.contrast.p for g in gaps])
    winners = [g for g, p in zip(gaps, adjusted, strict=True) if p < ALPHA and g.contrast.mean < 0]
    order = {fresh[s]: i for i, s in enumerate(ranking(runs, uniform)) if s in fresh}
    return min(winners, key=lambda g: order[g.schedule]).schedule.removesuffix(" (last stage)") if winners else None


@dataclass(frozen=True)
class Arm:
    sampler: str
    confirmation: Confirmation

    def __str__(self) -> str:
        return f"{self.sampler} {self.confirmation}"


YARDSTICK = Arm("tpe", Confirmation.parse(TODAY))


@dataclass(frozen=True)
class Outcome:
    runs: float
    right_pick: bool
    better_true: bool  # "better" for a schedule truly better than uniform
    better_false: bool  # "better" for one that is not
    regret: float  # true effect of the pick minus the best true effect


def score(verdict: Verdict, world: World) -> Outcome:
    best = min(0.0, float(world.effects.min()))
    called = verdict.better is not None
    better = verdict.better is not None and world.effect(verdict.better) < 0
    return Outcome(verdict.runs, verdict.pick == world.truth, better, called and not better, world.effect(verdict.pick) - best)


@dataclass(frozen=True)
class Settings:
    fitted: Fit
    arms: tuple[Arm, ...]
    explore: float
    noise_scale: float


SETTINGS: Settings | None = None  # set in each worker process


def _init(settings: Settings) -> None:
    global SETTINGS
    SETTINGS = settings
    optuna.logging.set_verbosity(optuna.logging.ERROR)


def replicate(task: tuple[Scenario, int]) -> list[Outcome]:
    """One replicate of one scenario: one search per sampler, every arm's confirmation on it; in `arms` order."""
    scenario, r = task
    st = SETTINGS
    assert st is not None
    world = World(scenario, st.fitted, r, st.noise_scale)
    searches = {(a.sampler, a.confirmation.horizon) for a in st.arms}
    longest = {k: max(a.confirmation.search for a in st.arms if (a.sampler, a.confirmation.horizon) == k) for k in searches}
    orders = {(s, h): search(world, scenario, st.fitted, s, r, n, st.explore, h) for (s, h), n in longest.items()}
    return [score(arm.confirmation.run(world, orders[(arm.sampler, arm.confirmation.horizon)]), world) for arm in st.arms]


def scenarios(fitted: Fit, planted: dict[str, float]) -> list[Scenario]:
    """The scenarios of the module's docstring, each naming the schedule it plants in."""
    family = fitted.config.family
    names = [str(s) for s in family.enumerate()]
    base = np.array([fitted.effects[s] for s in names])
    uniform = fitted.uniform
    additive = Additive(fitted.effects, family.counts, fitted.config.model.n_layer)
    predicted = dict(zip(names, additive.predict(names), strict=True))
    others = [s for s in names if s != uniform]
    favoured = min(others, key=predicted.__getitem__)
    single_early = [s for s in others if Schedule.parse(s).heads[0] == family.counts[0]]
    disfavoured = max(single_early or others, key=predicted.__getitem__)
    data = fitted.config.model_dump()
    data["space"] |= {"family": "free"}
    free = StudyConfig.model_validate(data).family  # parsed, so the space is resolved as the product resolves it
    free_names = [str(s) for s in free.enumerate()]
    free_base = additive.predict(free_names)
    free_row = Scenario(
        f"free ({len(free_names)} schedules, interaction sd {additive.residual_sd:.4f})",
        free,
        uniform,
        free_base - free_base[free_names.index(uniform)],
        additive.residual_sd,
        by_regret=True,
    )
    best = min(names, key=fitted.effects.__getitem__)
    truth = f"{best} best, {fitted.effects[best]:+.3f}" if fitted.effects[best] < 0 else "uniform best"
    out = [
        Scenario("global null", family, uniform, np.zeros(len(names)), by_regret=True),
        Scenario(f"fitted ({truth})", family, uniform, base),
    ]
    out += [
        Scenario(f"{where} {schedule} {effect:+g}", family, uniform, base, planted=((schedule, effect),))
        for where, schedule in (("favoured", favoured), ("disfavoured", disfavoured))
        for effect in (-0.005, -0.01)
    ]
    out.append(free_row)
    if planted:
        name = "planted " + ",".join(f"{s}={e:+g}" for s, e in planted.items())
        host = out[1] if set(planted) <= set(names) else free_row
        if not set(planted) <= set(host.schedules) or uniform in planted:
            bad = sorted(set(planted) - set(host.schedules) | {uniform} & set(planted))
            raise SystemExit(f"--plant: {bad} not a schedule other than uniform of the {free.name!r} family ({len(free_names)} schedules)")
        out.append(replace(host, name=name, planted=tuple(planted.items())))
    print(
        f"additive model of {fitted.study}'s effects (one indicator per layer and head count, ridge): R^2 {additive.r2:.2f}, "
        f"residual sd {additive.residual_sd:.4f}; it ranks {favoured} best ({predicted[favoured]:+.4f}) and {disfavoured} "
        f"worst of those that start with {family.counts[0]} head ({predicted[disfavoured]:+.4f}, "
        f"rank {sorted(others, key=predicted.__getitem__).index(disfavoured) + 1} of {len(others)})"
    )
    return out


def wilson(k: int, n: int) -> tuple[float, float]:
    low, high = proportion_confint(k, n, alpha=ALPHA, method="wilson")
    return float(low), float(high)


def paired_difference(arm: Sequence[bool], yardstick: Sequence[bool]) -> tuple[float, float, float]:
    """Rate of `arm` minus rate of `yardstick` on the same replicates, with its 95% interval: Newcombe's hybrid score
    interval for paired proportions (his method 10: the two Wilson intervals combined with the phi correlation of
    the 2x2 table), which stays inside [-1, 1] and is not degenerate when no replicate is discordant."""
    n = len(arm)
    assert n == len(yardstick) > 0
    a = sum(x and y for x, y in zip(arm, yardstick, strict=True))
    b = sum(x and not y for x, y in zip(arm, yardstick, strict=True))
    c = sum(y and not x for x, y in zip(arm, yardstick, strict=True))
    d = n - a - b - c
    p1, p2 = (a + b) / n, (a + c) / n
    (l1, u1), (l2, u2) = wilson(a + b, n), wilson(a + c, n)
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    phi = (a * d - b * c) / math.sqrt(margins) if margins else 0.0
    low = p1 - p2 - math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    high = p1 - p2 + math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    return p1 - p2, low, high


def paired_ratio(arm: Sequence[bool], yardstick: Sequence[bool], n_boot: int = 4000, seed: int = 0) -> tuple[float, float, float] | None:
    """Rate of `arm` over rate of `yardstick` on the same replicates, with a 95% percentile bootstrap interval that
    resamples replicates (so the pairing is kept); None when the yardstick never hits."""
    a, y = np.asarray(arm, dtype=float), np.asarray(yardstick, dtype=float)
    if not y.sum():
        return None
    picks = np.random.default_rng(seed).integers(0, len(a), (n_boot, len(a)))
    hits = y[picks].sum(axis=1)
    ratios = a[picks].sum(axis=1)[hits > 0] / hits[hits > 0]
    low, high = np.quantile(ratios, [ALPHA / 2, 1 - ALPHA / 2])
    return float(a.sum() / y.sum()), float(low), float(high)


def mean_difference(arm: Sequence[float], yardstick: Sequence[float]) -> tuple[float, float, float]:
    """Mean paired difference with its 95% t interval over replicates."""
    d = np.asarray(arm, dtype=float) - np.asarray(yardstick, dtype=float)
    mean = float(d.mean())
    if len(d) < 2 or not d.std():
        return mean, mean, mean
    half = float(stdtrit(len(d) - 1, 1 - ALPHA / 2)) * float(d.std(ddof=1)) / math.sqrt(len(d))
    return mean, mean - half, mean + half


@dataclass(frozen=True)
class Judgement:
    """An arm against the yardstick on one scenario: each paired difference with its interval, and the pass rule."""

    pick: tuple[float, float, float]
    better: tuple[float, float, float]
    false: tuple[float, float, float]
    regret: tuple[float, float, float]
    false_rate_high: float  # the arm's own false "better" rate, upper bound (the global null's check)
    token_share: float
    failures: tuple[str, ...]

    @property
    def passes(self) -> bool:
        return not self.failures


def judge(arm: Sequence[Outcome], yardstick: Sequence[Outcome], by_regret: bool, null: bool) -> Judgement:
    """The pass rule: right pick's difference >= -3 points at its lower bound (the regret's <= +0.001 at its upper
    bound where scored by regret), "better" for a truly better schedule >= -2 points, false "better" <= +1 point. The
    global null is the test of error control instead: every "better" is false and every pick has regret 0, so an
    arm passes it when its false "better" rate is at most alpha at its upper bound (a frozen pick tested alone may
    spend its alpha there, where today's Holm over five spends less)."""
    pick = paired_difference([o.right_pick for o in arm], [o.right_pick for o in yardstick])
    better = paired_difference([o.better_true for o in arm], [o.better_true for o in yardstick])
    false = paired_difference([o.better_false for o in arm], [o.better_false for o in yardstick])
    regret = mean_difference([o.regret for o in arm], [o.regret for o in yardstick])
    false_high = wilson(sum(o.better_false for o in arm), len(arm))[1]
    failures = []
    if by_regret and regret[2] > REGRET_MARGIN:
        failures.append(f"regret +{regret[2] - REGRET_MARGIN:.4f} above +{REGRET_MARGIN:g}")
    if not by_regret and pick[1] < PICK_MARGIN:
        failures.append(f"right pick {100 * (PICK_MARGIN - pick[1]):.1f} pt below {100 * PICK_MARGIN:+.0f}")
    if better[1] < BETTER_MARGIN:
        failures.append(f"better {100 * (BETTER_MARGIN - better[1]):.1f} pt below {100 * BETTER_MARGIN:+.0f}")
    if null and false_high > ALPHA:
        failures.append(f"false better rate {100 * (false_high - ALPHA):.1f} pt above alpha")
    if not null and false[2] > FALSE_MARGIN:
        failures.append(f"false better {100 * (false[2] - FALSE_MARGIN):.1f} pt above {100 * FALSE_MARGIN:+.0f}")
    share = statistics.fmean(o.runs for o in arm) / statistics.fmean(o.runs for o in yardstick)
    return Judgement(pick, better, false, regret, false_high, share, tuple(failures))


def run(settings: Settings, tasks: list[tuple[Scenario, int]], workers: int) -> list[list[Outcome]]:
    """Every task's outcomes (one per arm), in one process or a pool of `workers`."""
    if workers == 1:
        _init(settings)
        return list(map(replicate, tasks))
    with multiprocessing.Pool(workers, initializer=_init, initargs=(settings,)) as pool:
        return list(pool.imap(replicate, tasks, chunksize=4))


def _rate(hits: Iterable[bool]) -> str:
    values = list(hits)
    low, high = wilson(sum(values), len(values))
    return f"{sum(values) / len(values):.1%} [{low:.1%}, {high:.1%}]"


def _share(hits: Iterable[bool]) -> str:
    values = list(hits)
    return f"{sum(values) / len(values):.1%}"


def _points(d: tuple[float, float, float]) -> str:
    return f"{100 * d[0]:+.1f} [{100 * d[1]:+.1f}, {100 * d[2]:+.1f}]"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--db", default="docs/results/bench.db")
    p.add_argument("--study", default="bench-main", help="the study in --db whose runs the simulator is fitted to")
    p.add_argument("--replicates", type=int, default=300, help="paired replicates per scenario (1000 for a promotion)")
    p.add_argument("--samplers", nargs="+", choices=SAMPLERS, default=["random", "additive"], help="searches the confirmations follow")
    p.add_argument(
        "--confirmations", nargs="+", default=list(CONFIRMATIONS), help=f"each as words: bB nN topT rR kK sS hP pooled (today's: {TODAY!r})"
    )
    p.add_argument("--scenarios", nargs="+", default=None, help="run only scenarios whose name starts with one of these")
    p.add_argument(
        "--plant", action="append", default=[], metavar="SCHEDULE=EFFECT", help="a 'planted' scenario (repeatable; any free schedule)"
    )
    p.add_argument(
        "--residual-noise-scale",
        type=float,
        default=1.0,
        help="multiplies the fitted residual sd, the one noise that moves a decision: seed effects cancel in every paired "
        "gap and in the blocked model, and a sampler sees only the search seed, shifted as a whole, so they are not scaled",
    )
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
    confirmations = [Confirmation.parse(c) for c in args.confirmations]
    arms = (YARDSTICK, *(a for a in (Arm(s, c) for s in args.samplers for c in confirmations) if a != YARDSTICK))
    fitted = fit(args.db, args.study)
    print(
        f"fitted to {fitted.study} (uniform {fitted.uniform}): {len(fitted.effects)} schedules, seed-effect sd "
        f"{fitted.seed_sd:.4f}, residual sd {fitted.noise_sd:.4f} (x{args.residual_noise_scale:g}); "
        f"a run is {fitted.full / 1e6:.2f} M tokens; yardstick "
        f"{YARDSTICK} ({YARDSTICK.confirmation.runs_at_most()} runs); additive explore share {args.explore:g}"
    )
    chosen = [s for s in scenarios(fitted, planted) if args.scenarios is None or any(s.name.startswith(w) for w in args.scenarios)]
    settings = Settings(fitted, arms, args.explore, args.residual_noise_scale)
    print(
        "| scenario | arm | replicates | M tokens (share) | right pick | Δ right pick, pt | 'better' (truly better) | Δ 'better', pt "
        "| false 'better' | Δ false, pt | regret x1000 | Δ regret x1000 | passes |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for sc in chosen:  # one scenario at a time, printed as it ends: a long run's finished rows are not lost
        started = time.perf_counter()
        outcomes = run(settings, [(sc, r) for r in range(args.replicates)], args.workers)
        cost = (time.perf_counter() - started) / args.replicates
        yardstick = [o[0] for o in outcomes]
        for i, arm in enumerate(arms):
            out = [o[i] for o in outcomes]
            j = judge(out, yardstick, sc.by_regret, sc.name == "global null")
            tokens = statistics.fmean(o.runs for o in out) * fitted.full / 1e6
            regret = 1000 * statistics.fmean(o.regret for o in out)
            dr = tuple(1000 * x for x in j.regret)
            verdict = "yes" if j.passes else "no: " + "; ".join(j.failures)
            print(
                f"| {sc.name} | {arm} | {len(out)} | {tokens:.1f} ({j.token_share:.0%}) | {_share(o.right_pick for o in out)} | "
                f"{_points(j.pick)} | {_share(o.better_true for o in out)} | {_points(j.better)} | {_rate(o.better_false for o in out)} | "
                f"{_points(j.false)} | {regret:.2f} | {dr[0]:+.2f} [{dr[1]:+.2f}, {dr[2]:+.2f}] | {verdict} |",
                flush=True,
            )
        for i, arm in enumerate(arms[1:], start=1):
            ratio = paired_ratio([o[i].better_true for o in outcomes], [o.better_true for o in yardstick])
            if ratio is not None:
                print(f"{sc.name}: {arm}: 'better' (truly better) {ratio[0]:.2f}x the yardstick's [{ratio[1]:.2f}, {ratio[2]:.2f}]")
        print(f"{sc.name}: {args.replicates} replicates, {cost:.2f} s per replicate (every search and confirmation)", flush=True)


if __name__ == "__main__":
    main()
