"""The neutrality constraint: a schedule must keep the uniform baseline's training throughput.

Each worker measures a trial's tokens/s ratio to the uniform baseline itself (`search.runner.worker`), timing both
schedules in the same process, alternately, moments apart, so machine load cancels out of the ratio. With
`search.min_throughput_ratio` set, `min_ratio - ratio` becomes an Optuna constraint (feasible when <= 0):
Optuna's samplers, `best_trial` and `best_trials` then skip infeasible schedules, and so do our summaries.
The runner writes it on each trial (search.storage.records.apply_constraint); the summary and export read it here.
"""

from __future__ import annotations

from optuna.trial import FrozenTrial


def is_feasible(trial: FrozenTrial) -> bool:
    return all(v <= 0.0 for v in trial.constraints.values())
