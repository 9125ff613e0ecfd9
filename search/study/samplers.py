"""Samplers by name, all seeded from the study seed; `grid` walks the family's own enumeration.

Optuna's GridSampler takes the product of parameter values, which for the sorted-switch encodings visits the same
schedule many times. `ScheduleGridSampler` instead hands out each member of the family once, in the family's
deterministic order, by giving every sampled trial the next unclaimed index (stored as a system attr, so
resumed runs and several drivers continue the walk). Enqueued trials (baseline, references, retries) keep their
fixed params; their schedules reappear in the walk and are then served by the duplicate cache.

`PriorSampler` narrows a prior-seeded study's first `search.n_startup_trials` proposals: each parameter, with
probability prior_strength, is taken from a prior schedule's encoding (trials cycle through the priors) and
moved by at most one step; otherwise the study's own sampler draws it. After that the study's sampler runs
unchanged, learning from every trial, prior or not.
"""

from __future__ import annotations

import random
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution
from optuna.trial import FrozenTrial, TrialState

from search.attrs import GRID_INDEX
from search.config import StudyConfig, family_for
from search.errors import GridExhausted
from search.families import ScheduleFamily
from search.storage import is_enqueued, storage_of, trial_id


class ScheduleGridSampler(optuna.samplers.BaseSampler):
    """Every schedule of `family` once, in `family.enumerate()` order."""

    def __init__(self, family: ScheduleFamily):
        self.family = family
        self.schedules = list(family.enumerate())

    def claimed(self, study: optuna.Study) -> set[int]:
        return {t.system_attrs[GRID_INDEX] for t in study.get_trials(deepcopy=False) if GRID_INDEX in t.system_attrs}

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        if is_enqueued(trial):
            return
        claimed = self.claimed(study)
        index = next((i for i in range(len(self.schedules)) if i not in claimed), None)
        if index is None:
            raise GridExhausted(f"the grid has visited all {len(self.schedules)} schedules of the {self.family.name!r} space")
        storage_of(study).set_trial_system_attr(trial_id(trial), GRID_INDEX, index)

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return {}

    def sample_relative(self, study, trial, search_space) -> dict[str, Any]:
        return {}

    def sample_independent(self, study: optuna.Study, trial: FrozenTrial, param_name: str, param_distribution) -> Any:
        schedule = self.schedules[trial.system_attrs[GRID_INDEX]]
        return self.family.params_for(schedule)[param_name]


def make_sampler(config: StudyConfig) -> optuna.samplers.BaseSampler:
    s = config.search
    match s.sampler:
        case "random":
            return optuna.samplers.RandomSampler(seed=config.seed)
        case "gp":
            return optuna.samplers.GPSampler(seed=config.seed, n_startup_trials=s.n_startup_trials)
        case "nsga2":
            return optuna.samplers.NSGAIISampler(seed=config.seed, population_size=s.population_size)
        case "grid":
            return ScheduleGridSampler(family_for(config))
        case _:
            return optuna.samplers.TPESampler(seed=config.seed, n_startup_trials=s.n_startup_trials)


def reachable_target(study: optuna.Study, target: int) -> int:
    """A grid study ends when its walk does: cap `target` at what the queue and the unclaimed schedules allow."""
    if not isinstance(study.sampler, ScheduleGridSampler):
        return target
    trials = study.get_trials(deepcopy=False)
    live = sum(t.state in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING, TrialState.WAITING) for t in trials)
    return min(target, live + len(study.sampler.schedules) - len(study.sampler.claimed(study)))


class PriorSampler(optuna.samplers.BaseSampler):
    """The study's sampler, except that trials numbered below `narrow_until` are drawn near prior schedules."""

    def __init__(self, base: optuna.samplers.BaseSampler, anchors: list[dict[str, Any]], strength: float, narrow_until: int, seed: int = 0):
        self.base, self.anchors, self.strength, self.narrow_until, self.seed = base, anchors, strength, narrow_until, seed

    def _narrowing(self, trial: FrozenTrial) -> bool:
        return bool(self.anchors) and self.strength > 0 and trial.number < self.narrow_until

    def infer_relative_search_space(self, study, trial):
        return {} if self._narrowing(trial) else self.base.infer_relative_search_space(study, trial)

    def sample_relative(self, study, trial, search_space):
        return {} if self._narrowing(trial) else self.base.sample_relative(study, trial, search_space)

    def sample_independent(self, study, trial, param_name: str, param_distribution: BaseDistribution) -> Any:
        if self._narrowing(trial):
            rng = random.Random(f"{self.seed}:{trial.number}:{param_name}")  # reproducible per trial and parameter
            anchor = self.anchors[trial.number % len(self.anchors)]
            if param_name in anchor and rng.random() < self.strength:
                return _near(anchor[param_name], param_distribution, rng)
        return self.base.sample_independent(study, trial, param_name, param_distribution)

    def before_trial(self, study, trial) -> None:
        self.base.before_trial(study, trial)

    def after_trial(self, study, trial, state, values) -> None:
        self.base.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self.base.reseed_rng()


def _near(value: Any, dist: BaseDistribution, rng: random.Random) -> Any:
    """`value` or one step away from it, uniformly, inside the distribution's range."""
    if isinstance(dist, IntDistribution):
        options = [v for v in (value - dist.step, value, value + dist.step) if dist.low <= v <= dist.high]
        return rng.choice(options or [value])
    if isinstance(dist, CategoricalDistribution) and value in dist.choices:
        i = dist.choices.index(value)
        return dist.choices[rng.choice([j for j in (i - 1, i, i + 1) if 0 <= j < len(dist.choices)])]
    return value
