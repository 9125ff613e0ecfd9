"""Rung-based successive halving for multi-objective studies, on a real Optuna study (no training needed)."""

import optuna
import pytest
from optuna.trial import TrialState

from prism import EvalPoint
from search.config import StudyConfig
from search.runner.context import StudyContext
from search.study.pruning import RungStopping, make_pruner, make_stopping, promotable, rungs


def _config(tiny_config: StudyConfig, **search) -> StudyConfig:
    data = tiny_config.model_dump()
    data["search"] |= {"objectives": ["val_loss", "throughput"], "pruner": "successive-halving", **search}
    return StudyConfig.model_validate(data)


def test_rungs_are_token_budgets_below_the_full_budget(tiny_config):
    # tiny: 20 steps x 8 x 32 tokens per evaluation, 60 steps in all
    assert rungs(_config(tiny_config, reduction_factor=2)) == [5120, 10240]
    assert rungs(_config(tiny_config, reduction_factor=3)) == [5120]
    assert rungs(_config(tiny_config, min_resource_evals=3)) == []


def test_promotion_rule_is_optunas_successive_halving():
    assert promotable(1.0, [], 2)  # alone at the rung: go on
    assert not promotable(2.0, [1.0], 2)  # fewer than eta+1 competitors: only the best goes on
    assert promotable(1.0, [2.0, 3.0, 4.0], 2)  # best 4 // 2 = 2 of 4 go on
    assert promotable(2.0, [1.0, 3.0, 4.0], 2)
    assert not promotable(3.0, [1.0, 2.0, 4.0], 2)


def _point(tokens, loss):
    return EvalPoint(step=tokens // 256, tokens=tokens, val_loss=loss, train_loss=loss)


def test_weak_multi_objective_trials_stop_at_a_rung_and_strong_ones_go_on(tiny_config):
    config = _config(tiny_config, reduction_factor=2)
    study = optuna.create_study(directions=["minimize", "maximize"])
    stopper = make_stopping(StudyContext(config, config.family, study, fingerprint="test"))
    assert isinstance(stopper, RungStopping)
    with pytest.raises(NotImplementedError):  # why this module exists
        optuna.create_study(directions=["minimize", "maximize"]).ask().report(1.0, 1)

    decisions = {}
    for number, loss in enumerate([3.0, 3.1, 2.9, 3.3]):
        trial = study.ask()
        stopped = None
        for tokens in (5120, 10240, 15360):
            point = _point(tokens, loss - tokens / 1e5)
            stopper.report(trial, point)
            if stopper.should_stop(trial, point):
                stopped = trial.user_attrs["pruned_at_rung"]
                study.tell(trial, state=TrialState.PRUNED)
                break
        else:
            study.tell(trial, [point.val_loss, 1000.0])
        decisions[number] = stopped
    # trial 0 is alone; 1 is worse than 0 with 2 at the rung; 2 is best; 3 is worst of 4 (only 2 go on)
    assert decisions == {0: None, 1: 0, 2: None, 3: 0}
    stored = study.trials
    assert stored[1].state == TrialState.PRUNED and stored[1].user_attrs["rung_0"] == pytest.approx(3.1 - 0.0512)
    assert "rung_1" in stored[2].user_attrs and "rung_1" not in stored[1].user_attrs


def _complete(study, schedule, seed, curve, role="search"):
    """A trial that reports its curve through Optuna (so the pruner records its rung values) and completes."""
    trial = study.ask()
    for key, value in {"schedule": schedule, "seed": seed, "role": role}.items():
        trial.set_user_attr(key, value)
    for tokens, loss in sorted(curve.items()):
        trial.report(loss, tokens)
        trial.should_prune()
    study.tell(trial, curve[max(curve)])


def test_auto_prunes_only_from_the_first_rung_that_ranks_reliably_in_the_study_s_own_curves(tiny_config):
    """Ten complete runs whose loss at 5,120 tokens ranks them backwards and at 10,240 like the end: a weak trial is
    never stopped at 5,120, is stopped at 10,240, and nothing at all is stopped before any curve agrees."""
    from search.attrs import ATTR_CONFIG
    from search.study.pruning import ReliableRungGate

    data = tiny_config.model_dump()
    data["search"] |= {"pruner": "successive-halving", "min_resource_evals": "auto", "reduction_factor": 2}
    data["train"] |= {"steps": 80}  # evaluations at 5,120, 10,240 and 15,360 tokens, the end at 20,480
    config = StudyConfig.model_validate(data)
    study = optuna.create_study(pruner=make_pruner(config))
    study.set_user_attr(ATTR_CONFIG, config.model_dump_json())
    gate = ReliableRungGate(config)
    assert not gate.allows(study, 15360)  # no complete curve yet: trials run to the end
    _complete(study, "1x3", 0, {5120: 3.0, 10240: 2.5, 15360: 2.2, 20480: 2.0}, role="baseline")
    for k in range(9):
        final = 2.01 + 0.01 * k
        _complete(study, f"s{k}", 0, {5120: 2.9 - 0.01 * k, 10240: final + 0.5, 15360: final + 0.2, 20480: final})
    assert gate.start(study) == 10240 and not gate.allows(study, 5120) and gate.allows(study, 10240)

    weak = study.ask()
    weak.report(9.0, 5120)  # far worse than everyone: Optuna's rule would cut it, but this rung ranks backwards
    assert not weak.should_prune()
    weak.report(9.0, 10240)
    assert weak.should_prune()


def test_a_fixed_first_rung_is_unchanged_by_the_gate(tiny_config):
    config = _config(tiny_config, reduction_factor=2)
    assert rungs(config) == [5120, 10240] and RungStopping(optuna.create_study(directions=["minimize", "maximize"]), config).gate is None
