"""Do geometry-derived priors reduce the trials a search needs to get within noise of the best schedule?

Ground truth comes from a table: every schedule of a small space (scripts/data/priors_space.toml, the `ramp`
family over 4 layers) trained at `--seeds` seeds, plus the profile of the uniform baseline trained at the study
seed (what `run --prior auto` would audit). Build it once (minutes on 2 cores):

    .venv/bin/python scripts/bench_priors.py --make-table

Replay (the default, seconds): for each search seed, run a blind and a prior-seeded search with the same trial
budget through the study machinery itself (`open_study` with its baselines and TPE sampler; for the prior arm
`make_prior` + `seed_study` + `narrow_sampler`, exactly what `run --prior auto` does), answering each trial from
the table at the trial's training seed instead of training. Pruning is not replayed: every trial is a full run.

    .venv/bin/python scripts/bench_priors.py --search-seeds 30

Measured per search: trials (baselines included; they cost budget in both arms) until the search has run a
schedule whose mean loss over table seeds is within noise of the best mean (noise: 2 x the standard error of a
difference of two table means, pooled seed std), and until it has run the best schedule itself.
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

from prism import Trainer, load_corpus
from search.config import StudyConfig, family_for, load_config
from search.priors import audit_model, make_prior
from search.study.create import open_study
from search.study.lifecycle import narrow_sampler, seed_study

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
        row["profile"] = audit_model(trainer.model, source=f"{config.name} baseline {schedule} seed {seed}")
    return row


def make_table(config: StudyConfig, seeds: int, workers: int) -> None:
    """Train the (schedule, seed) pairs the table lacks, so adding a seed later trains only that seed."""
    schedules = [str(s) for s in family_for(config).enumerate()]
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
            PROFILE.write_text(json.dumps(row.pop("profile"), indent=1))
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
def truth(table: dict[tuple[str, int], float], config: StudyConfig) -> tuple[dict[str, float], float]:
    """Mean loss per schedule over table seeds, and the 'within noise' margin."""
    by_schedule: dict[str, list[float]] = {}
    for (schedule, _), value in table.items():
        by_schedule.setdefault(schedule, []).append(value)
    n_seeds = min(len(v) for v in by_schedule.values())
    pooled_sd = math.sqrt(statistics.mean(statistics.variance(v) for v in by_schedule.values()))
    margin = 2 * pooled_sd * math.sqrt(2 / n_seeds)  # 2 x standard error of a difference of two means
    print(f"pooled seed std {pooled_sd:.4f} over {n_seeds} seeds")
    return {s: statistics.mean(v) for s, v in by_schedule.items()}, margin


def search_once(config: StudyConfig, table, profile: dict | None, budget: int) -> list[str]:
    """The schedules a search runs, in order; `profile` given = prior-seeded as `run --prior auto` does."""
    study = open_study(config, optuna.storages.InMemoryStorage(), fingerprint="replay")
    if profile is not None:
        seed_study(study, config, make_prior(profile, config), profile)
        narrow_sampler(study, config)
    family = family_for(config)
    order = []
    for _ in range(budget):
        trial = study.ask()
        schedule = str(family.suggest(trial))  # an enqueued trial's parameters are fixed: it decodes to its schedule
        study.tell(trial, table[(schedule, trial.user_attrs.get("seed", config.seed))])
        order.append(schedule)
    return order


def first_hit(order: list[str], targets: set[str], budget: int) -> int:
    return next((i + 1 for i, s in enumerate(order) if s in targets), budget + 1)  # budget + 1 = not reached


def _stats(values: list[int], budget: int) -> str:
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    hit = sum(v <= budget for v in values) / len(values)
    return (
        f"{statistics.median(values):.1f} | {q[0]:.1f}-{q[2]:.1f} | {statistics.mean(values):.2f} ± "
        f"{statistics.stdev(values) if len(values) > 1 else 0:.2f} | {hit:.0%}"
    )


def replay(config: StudyConfig, search_seeds: int, budget: int) -> None:
    table = read_table()
    profile = json.loads(PROFILE.read_text())
    means, margin = truth(table, config)
    best = min(means, key=means.get)
    near = {s for s, m in means.items() if m <= means[best] + margin}
    ranking = sorted(means, key=means.get)
    prior = make_prior(profile, config)
    print(
        f"space: {len(means)} schedules x {len({k[1] for k in table})} seeds; best {best} ({means[best]:.4f}); "
        f"within noise (+{margin:.4f}): {len(near)} schedules: {', '.join(sorted(near, key=means.get))}"
    )
    print(f"baseline {config.baseline}: {means[str(config.baseline)]:.4f}, true rank {ranking.index(str(config.baseline)) + 1}")
    print("profile zones: " + ", ".join(f"{z['depth']:.3f} (layer {z['layer']}, strength {z['strength']:.2f})" for z in profile["zones"]))
    print(
        "prior schedules (true rank of each): "
        + ", ".join(f"{e['schedule']} ({ranking.index(e['schedule']) + 1})" for e in prior["schedules"])
    )
    rows = {"blind": ([], []), "prior": ([], [])}
    started = time.perf_counter()
    for k in range(search_seeds):
        seeded = config.model_copy(update={"seed": 1000 + k})  # the sampler's seed; table seeds are offsets from it
        for arm, prof in (("blind", None), ("prior", profile)):
            order = search_once(seeded, _shifted(table, seeded.seed), prof, budget)
            rows[arm][0].append(first_hit(order, near, budget))
            rows[arm][1].append(first_hit(order, {best}, budget))
    print(f"\n{search_seeds} search seeds x 2 arms, budget {budget} trials, replayed in {time.perf_counter() - started:.1f} s\n")
    print("| arm | target | median trials | IQR | mean ± sd | reached within budget |")
    print("|---|---|---|---|---|---|")
    for arm, (to_near, to_best) in rows.items():
        print(f"| {arm} | within noise of best | {_stats(to_near, budget)} |")
        print(f"| {arm} | the best schedule | {_stats(to_best, budget)} |")
    diffs = [b - p for b, p in zip(rows["blind"][0], rows["prior"][0])]
    print(
        f"\npaired difference blind - prior (within noise), per search seed: mean {statistics.mean(diffs):+.2f} "
        f"± {statistics.stdev(diffs) / math.sqrt(len(diffs)):.2f} (s.e.), prior fewer in "
        f"{sum(d > 0 for d in diffs)}, equal in {sum(d == 0 for d in diffs)}, more in {sum(d < 0 for d in diffs)}"
    )


def _shifted(table, study_seed: int) -> dict[tuple[str, int], float]:
    """The table keyed by absolute training seed for a study whose seed is `study_seed` (table seed 0 = study seed)."""
    return {(s, study_seed + k): v for (s, k), v in table.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--make-table", action="store_true", help="train the whole space (minutes), then stop")
    parser.add_argument("--seeds", type=int, default=2, help="training seeds per schedule for --make-table")
    parser.add_argument("--workers", type=int, default=2, help="training processes for --make-table")
    parser.add_argument("--search-seeds", type=int, default=30)
    parser.add_argument("--budget", type=int, default=None, help="trials per search (default: the space size)")
    args = parser.parse_args()
    config = load_config(SPACE)
    if args.make_table:
        make_table(config, args.seeds, args.workers)
        return
    if not TABLE.is_file():
        sys.exit(f"no table at {TABLE}; build it once with --make-table")
    replay(config, args.search_seeds, args.budget or family_for(config).size())


if __name__ == "__main__":
    main()
