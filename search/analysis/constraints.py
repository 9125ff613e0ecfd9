"""The neutrality constraint: a schedule must keep the uniform baseline's training throughput.

Each worker measures a trial's tokens/s ratio to the uniform baseline itself (`search.runner.worker`), timing both
schedules in the same process, alternately, moments apart, so machine load cancels out of the ratio. With
`search.min_throughput_ratio` set, `min_ratio - ratio` becomes an Optuna constraint (feasible when <= 0):
Optuna's samplers, `best_trial` and `best_trials` then skip infeasible schedules, and so do our summaries.
The runner writes it on each trial; the summary and export read it back.
"""

from __future__ import annotations

import optuna
from optuna.trial import FrozenTrial

from search.attrs import THROUGHPUT_RATIO
from search.config import StudyConfig

CONSTRAINT = THROUGHPUT_RATIO


def apply_constraint(trial: optuna.Trial, config: StudyConfig, ratio: float | None) -> None:
    if config.search.min_throughput_ratio is not None and ratio is not None:
        trial.set_constraint(CONSTRAINT, config.search.min_throughput_ratio - ratio)


def is_feasible(trial: FrozenTrial) -> bool:
    return all(v <= 0.0 for v in trial.constraints.values())
