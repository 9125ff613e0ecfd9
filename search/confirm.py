"""Confirmation: re-train the best schedules and the uniform baseline with fresh seeds, so a winner is not a lucky seed.

Confirmation seeds are fixed (study seed + 1000 + k), never used by the search, so re-running `confirm` reuses every
run already done (the duplicate cache) and adding seeds only trains the new ones. Each schedule's gap to uniform is
paired per seed (same initial weights, data order and validation batches) and reported as mean ± std.
"""

from __future__ import annotations

import json
import statistics

import optuna
from optuna.trial import TrialState

from prism import Schedule
from search.config import PrismSearchError, StudyConfig
from search.study import ATTR_CONFIRMATION, enqueue, family_for, ranked, stored_config, val_loss

CONFIRM_SEED_OFFSET = 1000


def confirm_seeds(config: StudyConfig, n: int) -> list[int]:
    return [config.seed + CONFIRM_SEED_OFFSET + k for k in range(n)]


def top_schedules(study: optuna.Study, top: int) -> list[str]:
    """The `top` best distinct schedules other than the baseline among feasible complete trials at the study seed."""
    baseline = str(stored_config(study).baseline)
    out: list[str] = []
    for t in ranked(study):
        if t.user_attrs["schedule"] not in out and t.user_attrs["schedule"] != baseline:
            out.append(t.user_attrs["schedule"])
    if not out:
        raise PrismSearchError(f"study {study.study_name!r} has no complete feasible trial to confirm; run it first")
    return out[:top]


def plan(study: optuna.Study, top: int, seeds: int) -> int:
    """Queue the confirmation runs (baseline first); returns how many were queued."""
    config = stored_config(study)
    family = family_for(config)
    schedules = [str(config.baseline)] + top_schedules(study, top)
    for schedule in schedules:
        for seed in confirm_seeds(config, seeds):
            enqueue(study, family, Schedule.parse(schedule), role="confirm", seed=seed)
    study.set_user_attr(ATTR_CONFIRMATION + ".plan", json.dumps({"schedules": schedules, "seeds": seeds}))
    return len(schedules) * seeds


def collect(study: optuna.Study) -> list[dict]:
    """Mean ± std of each confirmed schedule's val loss and of its per-seed gap to uniform; stored on the study."""
    config = stored_config(study)
    planned = json.loads(study.user_attrs[ATTR_CONFIRMATION + ".plan"])
    seeds = confirm_seeds(config, planned["seeds"])
    runs: dict[tuple[str, int], float] = {}
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        if t.user_attrs.get("role") == "confirm" and t.user_attrs.get("seed") in seeds:
            runs[(t.user_attrs["schedule"], t.user_attrs["seed"])] = val_loss(t)
    baseline = planned["schedules"][0]
    rows = []
    for schedule in planned["schedules"]:
        values = [runs[(schedule, s)] for s in seeds if (schedule, s) in runs]
        gaps = [runs[(schedule, s)] - runs[(baseline, s)] for s in seeds if (schedule, s) in runs and (baseline, s) in runs]
        rows.append({
            "schedule": schedule, "seeds": len(values),
            "val_loss_mean": statistics.fmean(values) if values else None,
            "val_loss_std": statistics.stdev(values) if len(values) >= 2 else None,
            "gap_mean": statistics.fmean(gaps) if gaps else None,
            "gap_std": statistics.stdev(gaps) if len(gaps) >= 2 else None,
        })
    study.set_user_attr(ATTR_CONFIRMATION, json.dumps(rows))
    return rows


def run_confirmation(study: optuna.Study, fingerprint: str, top: int, seeds: int, n_workers: int, progress=None) -> list[dict]:
    """Queue, train (only what no earlier run covers) and collect the confirmation of the `top` schedules."""
    from search.early_stopping import make_stopping
    from search.runner.driver import Driver  # the driver needs Ray; planning and collecting don't

    config = stored_config(study)
    queued = plan(study, top, seeds)
    driver = Driver(study, config, fingerprint, progress, stopping=make_stopping(study, config))
    driver.run(driver.n_finished() + queued, n_workers)
    return collect(study)
