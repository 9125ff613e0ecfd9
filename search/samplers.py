"""Samplers by name, all seeded from the study seed; `grid` walks the family's own enumeration.

Optuna's GridSampler takes the product of parameter values, which for the sorted-switch encodings visits the same
schedule many times. `ScheduleGridSampler` instead hands out each member of the family once, in the family's
deterministic order, by giving every sampled trial the next unclaimed index (stored as a system attr, so
resumed runs and several drivers continue the walk). Enqueued trials (baseline, references, retries) keep their
fixed params; their schedules reappear in the walk and are then served by the duplicate cache.
"""

from __future__ import annotations

from typing import Any

import optuna
from optuna.distributions import BaseDistribution
from optuna.trial import FrozenTrial, TrialState

from search.config import StudyConfig
from search.errors import GridExhausted
from search.families import ScheduleFamily
from search.storage._optuna import storage_of, trial_id

GRID_ATTR = "prism.grid_index"


class ScheduleGridSampler(optuna.samplers.BaseSampler):
    """Every schedule of `family` once, in `family.enumerate()` order."""

    def __init__(self, family: ScheduleFamily):
        self.family = family
        self.schedules = list(family.enumerate())

    def claimed(self, study: optuna.Study) -> set[int]:
        return {t.system_attrs[GRID_ATTR] for t in study.get_trials(deepcopy=False) if GRID_ATTR in t.system_attrs}

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        if "fixed_params" in trial.system_attrs:
            return
        claimed = self.claimed(study)
        index = next((i for i in range(len(self.schedules)) if i not in claimed), None)
        if index is None:
            raise GridExhausted(f"the grid has visited all {len(self.schedules)} schedules of the {self.family.name!r} space")
        storage_of(study).set_trial_system_attr(trial_id(trial), GRID_ATTR, index)

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return {}

    def sample_relative(self, study, trial, search_space) -> dict[str, Any]:
        return {}

    def sample_independent(self, study: optuna.Study, trial: FrozenTrial, param_name: str, param_distribution) -> Any:
        schedule = self.schedules[trial.system_attrs[GRID_ATTR]]
        return self.family.params_for(schedule)[param_name]


def make_sampler(config: StudyConfig, family: ScheduleFamily) -> optuna.samplers.BaseSampler:
    s = config.search
    match s.sampler:
        case "random":
            return optuna.samplers.RandomSampler(seed=config.seed)
        case "gp":
            return optuna.samplers.GPSampler(seed=config.seed, n_startup_trials=s.n_startup_trials)
        case "nsga2":
            return optuna.samplers.NSGAIISampler(seed=config.seed, population_size=s.population_size)
        case "grid":
            return ScheduleGridSampler(family)
        case _:
            return optuna.samplers.TPESampler(seed=config.seed, n_startup_trials=s.n_startup_trials)


def reachable_target(study: optuna.Study, target: int) -> int:
    """A grid study ends when its walk does: cap `target` at what the queue and the unclaimed schedules allow."""
    if not isinstance(study.sampler, ScheduleGridSampler):
        return target
    trials = study.get_trials(deepcopy=False)
    live = sum(t.state in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING, TrialState.WAITING) for t in trials)
    return min(target, live + len(study.sampler.schedules) - len(study.sampler.claimed(study)))
