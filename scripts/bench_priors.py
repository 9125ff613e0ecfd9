"""How many trained trials does each searcher need to get within noise of the best schedule?

Arms: random, TPE, GP (the study's sampler set to each) and prior-seeded TPE (`run --prior auto`: audit the
uniform baseline, map its geometry to schedules, seed and narrow the sampler). Every search goes through the study
machinery itself (`open_study` with its baselines and references) and is answered from a table of trained runs at
the trial's training seed instead of training. A re-proposed (schedule, seed) is answered but not counted, as the
product's duplicate cache does. Pruning is not replayed: every trial is a full run.

Tables: the small built-in one (scripts/data/priors_space.toml, the `ramp` family over 4 layers, every schedule at
3 seeds, with the baseline's profile), built once in minutes on 2 cores:

    .venv/bin/python scripts/bench_priors.py --make-table --seeds 3
    .venv/bin/python scripts/bench_priors.py --search-seeds 30

or a benchmark study's runs (seeds every schedule has; the prior arm needs the baseline's profile, made once):

    .venv/bin/python scripts/bench_priors.py --db docs/results/bench.db --study bench-main --make-profile
    .venv/bin/python scripts/bench_priors.py --db docs/results/bench.db --study bench-main --search-seeds 30

Measured per search: trained trials (baselines and references included; they cost budget in every arm) until the
search has run a schedule whose mean loss over table seeds is within noise of the best mean (noise: 2 x the
standard error of a paired difference of two table means, pooled over schedules), and until it has run the best
schedule itself; then the same two targets among the searched schedules only (the enqueued baseline and references
are trained first by every arm, so a target among them says nothing about the searcher).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import optuna
import torch
from optuna.trial import TrialState

from prism import Trainer, load_corpus
from search.config import StudyConfig, load_config, references_for
from search.priors import Profile, audit_model, make_prior
from search.study._lifecycle import narrow_sampler, seed_study
from search.study.create import open_study

DATA = Path(__file__).parent / "data"
SPACE, TABLE, PROFILE = DATA / "priors_space.toml", DATA / "priors_table.csv", DATA / "priors_profile.json"


# -- the table -----------------------------------------------------------------------------------------------
def _train(job: tuple[StudyConfig, str, int, bool]) -> dict:
    config, schedule, seed, audit = job
    torch.set_num_threads(1)
    from prism import Schedule

    corpus = load_corpus(config.data.corpus, config.data.val_fraction)
    trainer = Trainer(config.model_config_, Schedule.parse(schedule), config.train.to_train_config(seed), corpus)
    while not trainer.done:
        trainer.run_to_next_eval()
    result = trainer.result()
    row = {"schedule": schedule, "seed": seed, "val_loss": result.final_val_loss, "wall_s": round(result.wall_time_s, 2)}
    if audit:
        row["profile"] = audit_model(trainer.model, source=f"{config.name} baseline {schedule} seed {seed}", trained_on=config.data.corpus)
    return row


def make_table(config: StudyConfig, seeds: int, workers: int) -> None:
    """Train the (schedule, seed) pairs the table lacks, so adding a seed later trains only that seed."""
    schedules = [str(s) for s in config.family.enumerate()]
    baseline = str(config.baseline)
    done = read_table() if TABLE.is_file() else {}
    jobs = [
        (config, s, config.seed + k, s == baseline and k == 0 and not PROFILE.is_file())
        for k in range(seeds)
        for s in schedules
        if (s, config.seed + k) not in done
    ]
    started = time.perf_counter()
    rows = [{"schedule": s, "seed": k, "val_loss": v, "wall_s": ""} for (s, k), v in done.items()]
    with ProcessPoolExecutor(workers) as pool:
        for i, row in enumerate(pool.map(_train, jobs), start=1):
            rows.append(row)
            print(f"[{i}/{len(jobs)}] {row['schedule']} seed {row['seed']}: {row['val_loss']:.4f} ({row['wall_s']:.0f} s)", flush=True)
    for row in rows:
        if "profile" in row:
            PROFILE.write_text(json.dumps(row.pop("profile").to_dict(), indent=1))
    with TABLE.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["schedule", "seed", "val_loss", "wall_s"])
        writer.writeheader()
        writer.writerows(rows)
    print(
        f"{len(jobs)} new runs ({len(schedules)} schedules x {seeds} seeds in all) in {time.perf_counter() - started:.0f} s "
        f"with {workers} processes -> {TABLE.name}, {PROFILE.name}"
    )


def read_table() -> dict[tuple[str, int], float]:
    with TABLE.open() as f:
        return {(r["schedule"], int(r["seed"])): float(r["val_loss"]) for r in csv.DictReader(f)}


# -- replay ----------------------------------------------------------------------------------------------------
ARMS = ("random", "tpe", "gp", "prior")  # the study's sampler set to each; "prior" = TPE seeded as `run --prior auto`


def table_from_db(db: Path, name: str) -> tuple[StudyConfig, dict[tuple[str, int], float]]:
    """A benchmark study's finished runs as a table: (schedule, seed offset) -> final val loss, seed 0 = study seed."""
    from search.storage.records import stored_config

    study = optuna.load_study(study_name=name, storage=f"sqlite:///{db}")
    config = stored_config(study)
    runs = {(t.user_attrs["schedule"], t.user_attrs["seed"]): t.values[0] for t in study.get_trials(states=[TrialState.COMPLETE])}
    seeds = sorted({seed for _, seed in runs}, key=lambda seed: (seed != config.seed, seed))
    offset = {seed: k for k, seed in enumerate(seeds)}
    schedules = {s for s, _ in runs}
    complete = [seed for seed in seeds if all((s, seed) in runs for s in schedules)]  # seeds every schedule has
    table = {(s, offset[seed]): v for (s, seed), v in runs.items() if seed in complete}
    print(f"{db}:{name}: {len(schedules)} schedules, seeds {complete} complete (of {seeds})")
    return config, table


def truth(table: dict[tuple[str, int], float]) -> tuple[dict[str, float], float]:
    """Mean loss per schedule over table seeds, and the 'within noise' margin: 2 x the standard error of a paired
    difference of two schedules' means (every schedule ran at the same seeds, so the comparison is paired)."""
    by_schedule: dict[str, dict[int, float]] = {}
    for (schedule, seed), value in table.items():
        by_schedule.setdefault(schedule, {})[seed] = value
    seeds = sorted(set.intersection(*(set(v) for v in by_schedule.values())))
    means = {s: statistics.mean(v[k] for k in seeds) for s, v in by_schedule.items()}
    best = min(means, key=means.__getitem__)
    diffs = [[v[k] - by_schedule[best][k] for k in seeds] for s, v in by_schedule.items() if s != best]
    pooled_sd = math.sqrt(statistics.mean(statistics.variance(d) for d in diffs))  # sd of a paired difference
    margin = 2 * pooled_sd / math.sqrt(len(seeds))
    print(f"pooled sd of a paired difference to the best {pooled_sd:.4f} over {len(seeds)} seeds")
    return means, margin


def search_once(config: StudyConfig, table, profile: Profile | None, budget: int, goal: str) -> list[str]:
    """The schedules a search trains, in order, until it trains `goal` or `budget` schedules; `profile` = prior-seeded.

    A proposal of a (schedule, seed) already trained is answered (the sampler learns) but not counted, as the
    product's duplicate cache does; a sampler that only re-proposes ends the search early (the space is exhausted
    for it), so a short list means the budget was never spent."""
    ctx = open_study(config, optuna.storages.InMemoryStorage(), fingerprint="replay")
    study, family = ctx.study, ctx.family
    if profile is not None:
        seed_study(ctx, make_prior(profile, config, family), profile)
        narrow_sampler(ctx)
    trained: list[str] = []
    seen: set[tuple[str, int]] = set()
    for _ in range(3 * budget):  # a sampler re-proposing that much has stopped exploring
        trial = study.ask()
        schedule = str(family.suggest(trial))  # an enqueued trial's parameters are fixed: it decodes to its schedule
        seed = trial.user_attrs.get("seed", config.seed)
        study.tell(trial, table[(schedule, seed)])
        if (schedule, seed) not in seen:
            seen.add((schedule, seed))
            trained.append(schedule)
            if len(trained) == budget or schedule == goal:
                break
    return trained


def first_hit(order: list[str], targets: set[str], budget: int) -> int:
    return next((i + 1 for i, s in enumerate(order) if s in targets), budget + 1)  # budget + 1 = not reached


def _stats(values: list[int], budget: int) -> str:
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    hit = sum(v <= budget for v in values) / len(values)
    return (
        f"{statistics.median(values):.1f} | {q[0]:.1f}-{q[2]:.1f} | {statistics.mean(values):.2f} ± "
        f"{statistics.stdev(values) if len(values) > 1 else 0:.2f} | {hit:.0%}"
    )


def replay(config: StudyConfig, table, profile: Profile | None, arms: list[str], search_seeds: int, budget: int) -> None:
    means, margin = truth(table)
    ranking = sorted(means, key=means.__getitem__)
    # every arm trains the enqueued schedules (baseline, references) first: a target among them is found for free
    enqueued = {str(config.baseline)} | {str(r.schedule) for r in references_for(config)}
    searched = [s for s in ranking if s not in enqueued]
    targets = {
        "within noise of best": {s for s in ranking if means[s] <= means[ranking[0]] + margin},
        "the best schedule": {ranking[0]},
        "searched, within noise of best": {s for s in searched if means[s] <= means[ranking[0]] + margin},
        "the best searched schedule": {searched[0]},
    }
    print(
        f"space: {len(means)} schedules x {len({k[1] for k in table})} seeds; best {ranking[0]} ({means[ranking[0]]:.4f}); "
        f"within noise (+{margin:.4f}): {len(targets['within noise of best'])} schedules: "
        + ", ".join(sorted(targets["within noise of best"], key=means.__getitem__))
    )
    print(f"baseline {config.baseline}: {means[str(config.baseline)]:.4f}, true rank {ranking.index(str(config.baseline)) + 1}")
    best_searched = f"{searched[0]} (rank {ranking.index(searched[0]) + 1})"
    print(f"enqueued (trained first by every arm): {', '.join(sorted(enqueued))}; best searched schedule {best_searched}")
    if profile is not None:
        prior = make_prior(profile, config, config.family)
        zones = [f"{z.depth:.3f} (layer {z.layer}, strength {z.strength:.2f})" for z in profile.zones]
        print("profile zones: " + ", ".join(zones))
        ranks = [f"{e.schedule} ({ranking.index(e.schedule) + 1})" for e in prior.schedules]
        print("prior schedules (true rank of each): " + ", ".join(ranks))
    elif "prior" in arms:
        arms = [a for a in arms if a != "prior"]
        print("no baseline profile: the prior arm is skipped (make one with --make-profile)")
    hits: dict[str, dict[str, list[int]]] = {arm: {t: [] for t in targets} for arm in arms}
    started = time.perf_counter()
    for k in range(search_seeds):
        for arm in arms:
            sampler = "tpe" if arm == "prior" else arm
            seeded = config.model_copy(update={"seed": 1000 + k, "search": config.search.model_copy(update={"sampler": sampler})})
            order = search_once(seeded, _shifted(table, seeded.seed), profile if arm == "prior" else None, budget, searched[0])
            for target, schedules in targets.items():
                hits[arm][target].append(first_hit(order, schedules, budget))
    elapsed = time.perf_counter() - started
    print(f"\n{search_seeds} search seeds x {len(arms)} arms, budget {budget} trained trials, replayed in {elapsed:.1f} s\n")
    print("| arm | target | median trials | IQR | mean ± sd | reached within budget |")
    print("|---|---|---|---|---|---|")
    for target in targets:
        for arm in arms:
            print(f"| {arm} | {target} | {_stats(hits[arm][target], budget)} |")
    for target in ("searched, within noise of best", "the best searched schedule"):
        for arm in arms:
            if arm == "random" or "random" not in hits:
                continue
            diffs = [r - a for r, a in zip(hits["random"][target], hits[arm][target])]
            if len(diffs) > 1:
                print(
                    f"paired random - {arm} (trials to {target}), per search seed: mean {statistics.mean(diffs):+.2f} "
                    f"± {statistics.stdev(diffs) / math.sqrt(len(diffs)):.2f} (s.e.); {arm} fewer in {sum(d > 0 for d in diffs)}, "
                    f"equal in {sum(d == 0 for d in diffs)}, more in {sum(d < 0 for d in diffs)}"
                )


def _shifted(table, study_seed: int) -> dict[tuple[str, int], float]:
    """The table keyed by absolute training seed for a study whose seed is `study_seed` (table seed 0 = study seed)."""
    return {(s, study_seed + k): v for (s, k), v in table.items()}


def make_profile(config: StudyConfig, path: Path) -> None:
    """Train the study's baseline at the study seed and audit it: the profile `run --prior auto` would map."""
    row = _train((config, str(config.baseline), config.seed, True))
    path.write_text(json.dumps(row["profile"].to_dict(), indent=1))
    print(f"baseline {row['schedule']} seed {row['seed']}: val loss {row['val_loss']:.4f} ({row['wall_s']:.0f} s) -> {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--make-table", action="store_true", help="train the whole small space (minutes), then stop")
    parser.add_argument("--seeds", type=int, default=2, help="training seeds per schedule for --make-table")
    parser.add_argument("--workers", type=int, default=2, help="training processes for --make-table")
    parser.add_argument("--db", type=Path, help="replay against a benchmark study's runs instead (e.g. docs/results/bench.db)")
    parser.add_argument("--study", default="bench-main", help="the study in --db")
    parser.add_argument("--make-profile", action="store_true", help="with --db: train and audit the study's baseline, then stop")
    parser.add_argument("--arms", default=",".join(ARMS), help=f"comma-separated subset of {','.join(ARMS)}")
    parser.add_argument("--search-seeds", type=int, default=30)
    parser.add_argument("--budget", type=int, default=None, help="trained trials per search (default: the space size)")
    args = parser.parse_args()
    if args.db is not None:
        config, table = table_from_db(args.db, args.study)
        profile_path = DATA / f"{args.study}_profile.json"
        if args.make_profile:
            make_profile(config, profile_path)
            return
    else:
        config = load_config(SPACE)
        if args.make_table:
            make_table(config, args.seeds, args.workers)
            return
        if not TABLE.is_file():
            sys.exit(f"no table at {TABLE}; build it once with --make-table")
        table, profile_path = read_table(), PROFILE
    profile = Profile.of(json.loads(profile_path.read_text()), str(profile_path)) if profile_path.is_file() else None
    arms = [a for a in args.arms.split(",") if a]
    if unknown := set(arms) - set(ARMS):
        sys.exit(f"error: --arms: unknown {sorted(unknown)} (fix: choose from {', '.join(ARMS)})")
    replay(config, table, profile, arms, args.search_seeds, args.budget or config.family.size())


if __name__ == "__main__":
    main()
