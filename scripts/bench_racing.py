"""Compute to a correct verdict: search-then-confirm (today) against racing, on a simulator fitted to bench-main.

    .venv/bin/python scripts/bench_racing.py                       # 200 replicates per scenario and strategy
    .venv/bin/python scripts/bench_racing.py --replicates 50       # quicker

The simulator: val loss(schedule, seed) = schedule effect + seed effect + noise, with the 28 schedule effects, the
spread of the seed effects and the residual sd estimated from bench-main (docs/results/bench.db) by the product's own
blocked model. Scenarios: the fitted effects (uniform is the true best: "better" is never right), and the same with
one schedule (`2x2,4x4`) planted 0.005 or 0.01 better than uniform (then it is the true best, and "better" for it is
the right verdict). Each replicate draws new seed effects and noise and a new order in which the search proposes
schedules (a sampler that learns nothing, the same for both strategies).

Strategies, each counted in training runs of 2.05 M tokens:
- today: uniform at 3 baseline seeds, the search trains N schedules at the search seed, then `confirm --top 5
  --seeds 3` trains the top 5 by mean and uniform on 3 fresh seeds;
- racing: the same baselines; after every run the product's race (search.analysis.racing.decide) names the runs to
  queue (paired seeds for challengers within the margin), which run before the next proposal, until the budget.
Both end with the product's verdict (search.analysis.verdict.decide, margin 0.01). Reported: runs spent, how often the
best schedule by mean is the true best, how often "better" is claimed for the true best, and how often for a schedule
that is not.
"""

from __future__ import annotations

import argparse
import math
import statistics

import numpy as np
import optuna

from search.analysis.blocked import many_to_one
from search.analysis.racing import Run
from search.analysis.racing import decide as race
from search.analysis.summary import study_runs
from search.analysis.verdict import decide
from search.storage.records import stored_config

UNIFORM, PLANTED, MARGIN, BASELINE_SEEDS, TOP, CONFIRM_SEEDS = "2x6", "2x2,4x4", 0.01, 3, 5, 3


def fit(db: str) -> tuple[dict[str, float], float, float]:
    """Schedule effects (uniform 0), the sd of seed effects, and the residual sd, from bench-main's blocked model."""
    study = optuna.load_study(study_name="bench-main", storage=f"sqlite:///{db}")
    runs = study_runs(study.get_trials(deepcopy=False), stored_config(study))
    family = many_to_one(runs, UNIFORM)
    effects = {UNIFORM: 0.0} | {g.schedule: g.contrast.mean for g in family.gaps}
    seeds = sorted({seed for _, seed in runs})
    seed_means = [statistics.fmean(runs[(s, seed)] - effects[s] for s in effects if (s, seed) in runs) for seed in seeds]
    assert family.sd_pair is not None
    return effects, statistics.stdev(seed_means), family.sd_pair / math.sqrt(2)


class World:
    """One replicate: fixed seed effects and noise per (schedule, seed), drawn on first use."""

    def __init__(self, effects: dict[str, float], seed_sd: float, noise_sd: float, rng: np.random.Generator):
        self.effects, self.seed_sd, self.noise_sd, self.rng = effects, seed_sd, noise_sd, rng
        self.luck: dict[int, float] = {}

    def train(self, schedule: str, seed: int) -> float:
        luck = self.luck.setdefault(seed, self.seed_sd * self.rng.standard_normal())
        return 2.0 + self.effects[schedule] + luck + self.noise_sd * self.rng.standard_normal()


def today(world: World, order: list[str], n_search: int) -> tuple[dict, dict]:
    runs = {(UNIFORM, s): world.train(UNIFORM, s) for s in range(BASELINE_SEEDS)}
    searched = order[:n_search]
    runs |= {(s, 0): world.train(s, 0) for s in searched}
    top = [g.schedule for g in many_to_one(runs, UNIFORM).gaps][:TOP]
    runs |= {(s, 1000 + k): world.train(s, 1000 + k) for s in [UNIFORM, *top] for k in range(CONFIRM_SEEDS)}
    return runs, {s: {0} for s in searched}


def racing(world: World, order: list[str], budget: int, max_seeds: int = 8) -> tuple[dict, dict]:
    runs = {(UNIFORM, s): world.train(UNIFORM, s) for s in range(BASELINE_SEEDS)}
    proposals = iter(order)
    searched: dict[str, set[int]] = {}
    while len(runs) < budget:
        queue = race([Run(s, seed, v) for (s, seed), v in runs.items()], UNIFORM, range(max_seeds), MARGIN).queue
        if queue:
            schedule, seed = queue[0]
        else:
            schedule = next(proposals, None)
            if schedule is None:
                break
            seed = 0
            searched[schedule] = {0}
        runs[(schedule, seed)] = world.train(schedule, seed)
    return runs, searched


def score(runs: dict, selected: dict, truth: str) -> tuple[bool, bool, bool]:
    """(best by mean is the true best, "better" claimed for the true best, "better" claimed for another schedule)."""
    d = decide(runs, UNIFORM, selected, MARGIN)
    gaps = d.family.gaps
    best = UNIFORM if not gaps or gaps[0].paired_mean > 0 else gaps[0].schedule
    better = d.verdict.kind == "better"
    return best == truth, better and d.verdict.schedule == truth, better and d.verdict.schedule != truth


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--db", default="docs/results/bench.db")
    p.add_argument("--replicates", type=int, default=200)
    p.add_argument("--search", type=int, default=20, help="schedules today's search trains at the search seed")
    args = p.parse_args()
    effects, seed_sd, noise_sd = fit(args.db)
    print(f"fitted to bench-main: {len(effects)} schedules, seed-effect sd {seed_sd:.4f}, residual sd {noise_sd:.4f}\n")
    today_runs = BASELINE_SEEDS + args.search + (TOP + 1) * CONFIRM_SEEDS
    print("| scenario | strategy | runs (M tokens) | best by mean = true best | 'better' for the true best | 'better' for another |")
    print("|---|---|---:|---:|---:|---:|")
    for name, planted in (("fitted (uniform best)", None), ("2x2,4x4 planted -0.005", -0.005), ("2x2,4x4 planted -0.01", -0.01)):
        scenario = effects | ({PLANTED: planted} if planted is not None else {})
        truth = min(scenario, key=scenario.__getitem__)
        strategies = {
            f"today (search {args.search}, confirm top {TOP} x {CONFIRM_SEEDS})": lambda w, o: today(w, o, args.search),
            f"racing, {today_runs // 2} runs (half)": lambda w, o: racing(w, o, today_runs // 2),
            f"racing, {today_runs} runs (same)": lambda w, o: racing(w, o, today_runs),
        }
        for label, strategy in strategies.items():
            rng = np.random.default_rng(0)  # the same replicates for every strategy: paired
            results, spent = [], []
            for _ in range(args.replicates):
                world = World(scenario, seed_sd, noise_sd, rng)
                order = [str(s) for s in rng.permutation([s for s in scenario if s != UNIFORM])]
                runs, selected = strategy(world, order)
                spent.append(len(runs))
                results.append(score(runs, selected, truth))
            rates = [_rate([r[i] for r in results]) for i in range(3)]
            tokens = statistics.fmean(spent) * 2.048
            print(f"| {name} | {label} | {statistics.fmean(spent):.1f} ({tokens:.0f}) | {rates[0]} | {rates[1]} | {rates[2]} |")


def _rate(hits: list[bool]) -> str:
    """Share with its 95% Wilson interval (binomial over replicates)."""
    n, k = len(hits), sum(hits)
    z = 1.96
    centre = (k + z * z / 2) / (n + z * z)
    half = z * math.sqrt(k * (n - k) / n + z * z / 4) / (n + z * z)
    return f"{k / n:.0%} [{max(0.0, centre - half):.0%}, {min(1.0, centre + half):.0%}]"


if __name__ == "__main__":
    main()
