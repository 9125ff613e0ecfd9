"""Realistic studies without training, for the dashboard's tests and benchmark (seconds instead of hours).

Trials are drawn by the study's own schedule family on an in-memory Optuna study and carry exactly the attrs the
driver writes (schedule, heads_XX, role, seed, tokens_per_s, curve, worker, pruned_at_tokens, error), then are
added to the real storage in one pass through the Optuna API. Val loss follows a known law so tests can check
what the figures show: one head (a full-width head) in an early layer hurts, and the earlier, the more.
"""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta
from typing import Literal

import optuna
from optuna.trial import TrialState

from search.attrs import (
    ATTR_AUDIT,
    ATTR_CONFIG,
    ATTR_FINGERPRINT,
    CURVE,
    ERROR,
    PRUNED_AT_TOKENS,
    ROLE,
    ROLE_BASELINE,
    ROLE_SEARCH,
    SEED,
    WORKER,
)
from search.config import StudyConfig
from search.storage.records import schedule_attrs

LOSS_FLOOR = 1.85
EARLY_HEAD_PENALTY = (0.06, 0.03, 0.01)  # added to val loss when layer 0, 1, 2 has the fewest allowed heads


def add_trial(study: optuna.Study, schedule: str, seed: int = 0, state: TrialState = TrialState.COMPLETE, **attrs) -> optuna.Trial:
    """One hand-made search trial (val loss 1.0 when COMPLETE; left RUNNING when asked): for the budget count and
    the stop rule, which read only states and attrs."""
    trial = study.ask()
    for key, value in {"schedule": schedule, "seed": seed, "role": "search", **attrs}.items():
        trial.set_user_attr(key, value)
    if state != TrialState.RUNNING:
        study.tell(trial, 1.0 if state == TrialState.COMPLETE else None, state=state)
    return trial


def _loss(heads: tuple[int, ...], fewest: int, seed: int, rng: random.Random) -> float:
    penalty = sum(p for p, h in zip(EARLY_HEAD_PENALTY, heads) if h == fewest)
    return LOSS_FLOOR + penalty + 0.004 * (seed % 7) + rng.gauss(0, 0.003)


def _audit(heads: tuple[int, ...], rng: random.Random) -> list[dict]:
    """A plausible per-layer geometry profile (fewer, wider heads look further back)."""
    n = len(heads)
    return [
        {
            "layer": l,
            "n_heads": h,
            "mad": 12 / math.sqrt(h) + l + rng.random(),
            "mad_relative": 0.3 / math.sqrt(h),
            "attn_entropy": 1.5 + 0.2 * math.log2(h),
            "matrix_entropy": 0.4 + 0.4 * (l + 1) / n,
            "token_curvature": 1.2 + 0.05 * l,
            "depth_curvature": 1.0 + 0.1 * l if l < n - 1 else None,
        }
        for l, h in enumerate(heads)
    ]


def synthetic_study(
    config: StudyConfig,
    storage: optuna.storages.BaseStorage | str,
    n_trials: int,
    *,
    running: int = 0,
    failed: int = 1,
    multi_objective: bool = False,
    audit: bool = False,
    workers: int = 2,
    seed: int = 0,
) -> optuna.Study:
    """Create study `config.name` with `n_trials` finished trials (+`running` RUNNING, `failed` FAIL ones)."""
    rng = random.Random(seed)
    family = config.family
    fewest = family.counts[0]
    directions: list[Literal["minimize", "maximize"]] = ["minimize", "maximize"] if multi_objective else ["minimize"]
    study = optuna.create_study(study_name=config.name, storage=storage, directions=directions)
    study.set_user_attr(ATTR_CONFIG, config.model_dump_json())
    study.set_user_attr(ATTR_FINGERPRINT, "synthetic")
    study.set_metric_names(["val_loss", "tokens_per_s"] if multi_objective else ["val_loss"])

    scratch = optuna.create_study(directions=directions, sampler=optuna.samplers.RandomSampler(seed=seed))
    baseline = config.baseline
    for k in range(config.search.baseline_seeds):
        scratch.enqueue_trial(family.params_for(baseline), user_attrs={ROLE: ROLE_BASELINE, SEED: config.seed + k})
    evals = max(1, config.train.steps // config.train.eval_every)
    tokens_per_eval = config.train.eval_every * config.train.batch_size * config.model.block_size
    clock = [datetime(2026, 1, 1, tzinfo=UTC)] * workers
    durations: list[tuple[int, timedelta, bool]] = []
    for i in range(n_trials + running + failed):
        trial = scratch.ask()
        schedule = family.suggest(trial)
        role, trial_seed = trial.user_attrs.get(ROLE, ROLE_SEARCH), trial.user_attrs.get(SEED, config.seed)
        for key, value in schedule_attrs(schedule, role, trial_seed).items():  # what the driver stores
            trial.set_user_attr(key, value)
        w = i % workers
        trial.set_user_attr(WORKER, {"host": "synthetic", "pid": 1000 + w, "device": "cpu"})
        final = _loss(schedule.heads, fewest, trial_seed, rng)
        tps = 15000 * (1 - 0.03 * sum(math.log2(h) for h in schedule.heads) / len(schedule.heads)) + rng.gauss(0, 100)
        curve = [[(e + 1) * tokens_per_eval, final + 0.7 * math.exp(-2.5 * (e + 1) / evals)] for e in range(evals)]
        state = TrialState.COMPLETE
        if i >= n_trials + running:
            state = TrialState.FAIL
            trial.set_user_attr(ERROR, "TrainingDiverged: loss is nan at step 12")
            curve = []
        elif i >= n_trials:
            state, curve = TrialState.RUNNING, curve[: max(1, evals // 2)]
        elif role == ROLE_SEARCH and evals > 1 and curve[0][1] > LOSS_FLOOR + 0.7 * math.exp(-2.5 / evals) + 0.02 and rng.random() < 0.6:
            state, curve = TrialState.PRUNED, curve[:1]  # the pruner stops weak trials at the first rung
            trial.set_user_attr(PRUNED_AT_TOKENS, curve[-1][0])
        if state in (TrialState.COMPLETE, TrialState.PRUNED):
            steps = len(curve) * config.train.eval_every
            for key, value in [
                ("tokens_per_s", tps),
                ("steps", steps),
                ("tokens", steps * config.train.batch_size * config.model.block_size),
                ("wall_time_s", steps * 0.05),
                (CURVE, curve),
            ]:
                trial.set_user_attr(key, value)
            if audit and (role != ROLE_SEARCH or i % 5 == 0):
                trial.set_user_attr(ATTR_AUDIT, _audit(schedule.heads, rng))
        if not multi_objective:
            for tokens, loss in curve:
                trial.report(loss, int(tokens))
        values = ([final, tps] if multi_objective else final) if state == TrialState.COMPLETE else None
        if state != TrialState.RUNNING:
            scratch.tell(trial, values, state=state)
        durations.append((w, timedelta(seconds=len(curve) * 5 + 1), state == TrialState.RUNNING))
    trials = scratch.get_trials()
    for frozen, (w, duration, is_running) in zip(trials, durations):  # a plausible timeline per worker
        frozen.datetime_start = clock[w]
        frozen.datetime_complete = None if is_running else clock[w] + duration
        clock[w] += duration + timedelta(seconds=1)
    study.add_trials(trials)
    return study
