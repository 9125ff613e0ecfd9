"""search.analysis.scored: which finished runs the statistics read, on trials built in memory (no storage)."""

import math

from optuna.trial import FrozenTrial, TrialState, create_trial

from search.analysis.scored import not_finite, scored


def _trial(state: TrialState, values: list[float] | None) -> FrozenTrial:
    """A trial as a storage would hand it back, unvalidated: optuna's create_trial refuses a nan value, which another
    tool's trial (or an older storage) may still hold."""
    return FrozenTrial(
        number=0,
        state=state,
        value=None,
        values=values,
        datetime_start=None,
        datetime_complete=None,
        params={},
        distributions={},
        user_attrs={},
        system_attrs={},
        intermediate_values={},
        trial_id=0,
    )


def test_only_complete_trials_with_every_value_finite_are_scored():
    """A mean over runs is only a number when each run's value is one: a finite COMPLETE run counts; an inf or nan
    value in any objective, a failed, pruned or running trial and a COMPLETE trial with no values do not."""
    assert scored(create_trial(value=2.01)) and scored(create_trial(values=[2.01, 3.5]))
    assert not scored(create_trial(value=math.inf)) and not scored(create_trial(value=-math.inf))
    assert not scored(_trial(TrialState.COMPLETE, [2.0, math.nan])) and not scored(_trial(TrialState.COMPLETE, [math.inf, 2.0]))
    assert not scored(create_trial(state=TrialState.FAIL)) and not scored(create_trial(state=TrialState.RUNNING))
    assert not scored(create_trial(state=TrialState.PRUNED, value=2.0))  # a pruned run's last value is no final loss
    assert not scored(_trial(TrialState.COMPLETE, None)) and not scored(_trial(TrialState.COMPLETE, []))


def test_not_finite_names_only_the_complete_runs_whose_value_is_inf_or_nan():
    """`status` counts these as failed runs for the statistics; a failed, pruned or running trial is counted as what it
    is elsewhere, and a finite run is no failure: neither is named here. The order of the trials is kept."""
    good, inf, nan = create_trial(value=2.0), create_trial(value=math.inf), _trial(TrialState.COMPLETE, [math.nan])
    others = [create_trial(state=TrialState.FAIL), create_trial(state=TrialState.PRUNED, value=math.inf), _trial(TrialState.COMPLETE, None)]
    found = not_finite([nan, good, *others, inf])
    assert len(found) == 2 and found[0] is nan and found[1] is inf
    assert not_finite([good, *others]) == [] and not_finite([]) == []
