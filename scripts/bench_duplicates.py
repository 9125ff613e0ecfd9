"""Served-duplicate rate of the quickstart's search, measured without training.

The quickstart's space (studies/quickstart.toml: ramp family, 15 schedules, n_trials 10) is searched with its real
sampler (TPE with the study's n_startup_trials, seeded with the study seed) from the study's real start (the uniform
baselines that `open_study` enqueues), once per sampler seed. Nothing trains: a trained (schedule, seed) gets
`synthetic_loss`, a fixed bowl in log2 head counts around the linear ramp from the fewest heads at the first layer
to the most at the last, plus 0.01 x seed, so TPE has a deterministic surface to model. A proposal whose
(schedule, seed) was trained is served from the duplicate cache exactly as the driver serves it (the same
`trial_schedule`, `find_original` and `copy_result`).

    before: served duplicates count as trials: the study stops at n_trials finished trials.
    after:  served duplicates are told to the sampler but not counted: the study stops at n_trials trained trials,
            or when the stop rule (search.study.policy.exhaustion) says the space is exhausted.

Printed per seed and on average: served duplicates / trials asked, distinct schedules trained, the longest run of
served duplicates in a row (what search.study.policy.duplicate_cap must stay above). Then, for a ramp space, the
served-duplicate rate (after) of two other encodings of the same space, to see whether the encoding is to blame:
`ordered` draws each switch from the previous one up to L (one vector per schedule, but the ranges vary per trial),
`index` draws the schedule's position in the family's enumeration (one fixed-range integer).

    .venv/bin/python scripts/bench_duplicates.py [--config studies/quickstart.toml] [--seeds 20] [--n-trials N]
"""

from __future__ import annotations

import argparse
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

import optuna

from prism import Schedule
from search.analysis.budget import budget
from search.config import StudyConfig, load_config
from search.families import RampFamily, ScheduleFamily
from search.runner.cache import copy_result, find_original
from search.runner.driver import trial_schedule
from search.storage.records import schedule_attrs
from search.study.create import open_study
from search.study.policy import Exhausted, exhausted

ROOT = Path(__file__).resolve().parents[1]


class OrderedRamp(RampFamily):
    """Each switch from the previous one to L: one parameter vector per schedule, ranges that vary per trial."""

    def suggest(self, trial: optuna.Trial) -> Schedule:
        switches: list[int] = []
        for name in self._param_names():
            switches.append(trial.suggest_int(name, switches[-1] if switches else 0, self.n_layer))
        return self.decode(switches)


class IndexRamp(RampFamily):
    """The schedule's position in the family's enumeration: one fixed-range integer, one value per schedule."""

    def suggest(self, trial: optuna.Trial) -> Schedule:
        members = list(self.enumerate())
        return members[trial.suggest_int("index", 0, len(members) - 1)]


def synthetic_loss(schedule: Schedule, seed: int, counts: list[int]) -> float:
    """2 + 0.05 x squared distance (in log2 heads) to the linear ramp from counts[0] to counts[-1], + 0.01 x seed."""
    lo, hi = math.log2(counts[0]), math.log2(counts[-1])
    n = schedule.n_layer
    ideal = [lo + (hi - lo) * layer / max(1, n - 1) for layer in range(n)]
    return 2.0 + 0.05 * sum((math.log2(h) - t) ** 2 for h, t in zip(schedule.heads, ideal)) + 0.01 * seed


@dataclass
class Run:
    asked: int
    served: int
    distinct: int
    longest_streak: int
    stopped: Exhausted | None


def simulate(config: StudyConfig, family: ScheduleFamily, count_served: bool) -> Run:
    """Ask, serve or 'train', tell, until the stop rule: n_trials finished (count_served) or the stop rule's."""
    study = open_study(config, optuna.storages.InMemoryStorage(), "synthetic").study
    streak = longest = 0
    while True:
        b = budget(study.get_trials(deepcopy=False), config.seed)
        stopped = None if count_served else exhausted(b, family, config.n_trials)
        if (b.trained + b.served if count_served else b.trained) >= config.n_trials or stopped:
            return Run(b.trained + b.served, b.served, len(b.schedules), longest, stopped)
        trial = study.ask()
        schedule = trial_schedule(trial, family)
        seed = trial.user_attrs.get("seed", config.seed)
        for key, value in schedule_attrs(schedule, trial.user_attrs.get("role", "search"), seed).items():
            trial.set_user_attr(key, value)
        original = find_original(study, str(schedule), seed, trial.number)
        if original is not None:
            copy_result(study, trial, original)
            streak += 1
            longest = max(longest, streak)
        else:
            study.tell(trial, synthetic_loss(schedule, seed, family.counts))
            streak = 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(ROOT / "studies" / "quickstart.toml"))
    parser.add_argument("--seeds", type=int, default=20, help="sampler seeds 0 .. SEEDS-1")
    parser.add_argument("--n-trials", type=int, help="instead of the config's: near or past the space's size")
    args = parser.parse_args()
    base = load_config(args.config)
    base = base.model_copy(update={"n_trials": args.n_trials or base.n_trials})
    print(f"{base.name}: {base.space.family} space of {base.family.size()} schedules, n_trials {base.n_trials}, {base.search.sampler}")
    print(f"{'seed':>4}  {'before: served/asked':>20}  {'distinct':>8}  {'after: served/asked':>20}  {'distinct':>8}  {'longest run':>11}")
    configs = [base.model_copy(update={"seed": seed, "name": f"{base.name}-{seed}"}) for seed in range(args.seeds)]
    rows = []
    for seed, config in enumerate(configs):
        family = config.family
        before, after = simulate(config, family, count_served=True), simulate(config, family, count_served=False)
        rows.append((before, after))
        print(
            f"{seed:>4}  {before.served:>9}/{before.asked:<10}  {before.distinct:>8}  {after.served:>9}/{after.asked:<10}  "
            f"{after.distinct:>8}  {after.longest_streak:>11}" + (f"  {after.stopped.text()}" if after.stopped else "")
        )
    for label, runs in (("before", [r[0] for r in rows]), ("after", [r[1] for r in rows])):
        rate = statistics.fmean(r.served / r.asked for r in runs)
        print(
            f"{label}: served-duplicate rate {rate:.1%} (mean over {len(runs)} seeds), distinct schedules trained "
            f"{statistics.fmean(r.distinct for r in runs):.1f} on average (min {min(r.distinct for r in runs)}), "
            f"longest run of served duplicates {max(r.longest_streak for r in runs)}, "
            f"stopped as exhausted {sum(r.stopped is not None for r in runs)}/{len(runs)}"
        )
    family = base.family
    if isinstance(family, RampFamily):
        for encoding in (OrderedRamp, IndexRamp):
            runs = [simulate(config, encoding(family.n_layer, family.counts), count_served=False) for config in configs]
            rate = statistics.fmean(r.served / r.asked for r in runs)
            print(f"after, {encoding.__name__} encoding: served-duplicate rate {rate:.1%}")


if __name__ == "__main__":
    main()
