"""The neutrality constraint as Optuna stores it: feasible when every value is <= 0 (search.analysis.constraints)."""

import optuna
import pytest

from search.analysis.constraints import is_feasible


def _trial(*constraints: float) -> optuna.trial.FrozenTrial:
    """A finished trial with `constraints` set as the runner sets them (search.storage.records.apply_constraint)."""
    trial = optuna.trial.create_trial(value=1.0)
    for k, value in enumerate(constraints):
        trial.set_constraint(f"c{k}", value)
    return trial


@pytest.mark.parametrize(
    "constraints, feasible",
    [
        ((), True),  # no constraint stored (search.min_throughput_ratio unset): every trial is feasible
        ((-0.2,), True),  # faster than the minimum ratio asks
        ((0.0,), True),  # exactly at it: Optuna's own rule, min_ratio - ratio <= 0
        ((1e-9,), False),  # a hair below the minimum ratio
        ((-0.1, 0.3), False),  # every constraint must hold
    ],
)
def test_a_trial_is_feasible_when_every_constraint_is_at_most_zero(constraints, feasible):
    assert is_feasible(_trial(*constraints)) is feasible
