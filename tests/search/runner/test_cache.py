"""The duplicate cache's lookup and copy on a real SQLite-backed Optuna study (the driver-level behaviour is e2e)."""

import optuna
import pytest
from optuna.trial import TrialState

from search.attrs import DUPLICATE_ATTR
from search.runner.cache import copy_result, find_original, holder


def _trial(study, schedule, seed=0, **attrs):
    trial = study.ask()
    for key, value in {"schedule": schedule, "seed": seed, "role": "search", **attrs}.items():
        trial.set_user_attr(key, value)
    return trial


@pytest.fixture
def study(tmp_path):
    return optuna.create_study(storage=f"sqlite:///{tmp_path / 'c.db'}")


def test_original_is_the_finished_run_of_the_same_schedule_and_seed(study):
    running = _trial(study, "1x2,4x1")
    assert find_original(study, "1x2,4x1", 0, number=99).number == running.number  # running counts too
    done = _trial(study, "1x2,4x1")
    study.tell(done, 3.0)
    assert find_original(study, "1x2,4x1", 0, number=99).number == done.number  # finished wins over running
    assert find_original(study, "1x2,4x1", 1, number=99) is None  # another seed is another training run
    assert find_original(study, "2x3", 0, number=99) is None
    failed = _trial(study, "2x3")
    study.tell(failed, state=TrialState.FAIL)
    assert find_original(study, "2x3", 0, number=99) is None  # a failure is not a result


def test_a_copy_gets_values_metrics_constraint_and_names_its_original(study):
    original = _trial(study, "1x2,4x1", tokens_per_s=1234.5, throughput_ratio=0.8, worker={"pid": 1})
    original.set_constraint("throughput_ratio", 0.1)
    study.tell(original, 3.0)
    copy = _trial(study, "1x2,4x1")
    assert copy_result(study, copy, find_original(study, "1x2,4x1", 0, copy.number)) == TrialState.COMPLETE
    stored = study.trials[copy.number]
    assert stored.value == 3.0 and stored.user_attrs[DUPLICATE_ATTR] == original.number
    assert stored.user_attrs["tokens_per_s"] == 1234.5 and "worker" not in stored.user_attrs  # it ran nowhere
    assert stored.constraints == {"throughput_ratio": 0.1}
    with pytest.raises(ValueError, match="No feasible trials"):  # the copied constraint makes it infeasible too
        _ = study.best_trial


def test_a_copy_of_a_pruned_trial_is_pruned_with_its_learning_curve(study):
    original = _trial(study, "4x3")
    original.report(3.3, 5120)
    original.report(3.2, 10240)
    study.tell(original, state=TrialState.PRUNED)
    copy = _trial(study, "4x3")
    assert copy_result(study, copy, study.trials[original.number]) == TrialState.PRUNED
    stored = study.trials[copy.number]
    assert stored.state == TrialState.PRUNED and stored.intermediate_values == {5120: 3.3, 10240: 3.2}
    assert stored.value == 3.2 and stored.user_attrs[DUPLICATE_ATTR] == original.number


def test_a_multi_objective_copy_keeps_both_values(tmp_path):
    study = optuna.create_study(directions=["minimize", "maximize"], storage=f"sqlite:///{tmp_path / 'm.db'}")
    original = _trial(study, "1x3", rung_0=3.25)
    study.tell(original, [3.1, 2000.0])
    copy = _trial(study, "1x3")
    copy_result(study, copy, study.trials[0])
    assert study.trials[1].values == [3.1, 2000.0] and study.trials[1].user_attrs["rung_0"] == 3.25


def test_a_copy_is_held_by_a_trial_that_trains_its_schedule_even_one_still_queued(study):
    original = _trial(study, "1x2,4x1")
    copy = _trial(study, "1x2,4x1", **{DUPLICATE_ATTR: original.number})
    assert holder(study, original) is None  # not a copy: what it trains is its own
    assert holder(study, copy).number == original.number  # running
    study.tell(original, state=TrialState.FAIL)
    assert holder(study, copy) is None  # failed for good: the copy is what is left of the schedule
    study.enqueue_trial({}, user_attrs={"schedule": "1x2,4x1", "seed": 0, "role": "search", "retry_of": original.number})
    assert holder(study, copy).state == TrialState.WAITING  # the original's retry
    lone = _trial(study, "2x3", **{DUPLICATE_ATTR: 0})
    _trial(study, "2x3", seed=1)
    _trial(study, "2x3", **{DUPLICATE_ATTR: 0})
    assert holder(study, lone) is None  # another seed's run is another run, and another copy trains nothing
