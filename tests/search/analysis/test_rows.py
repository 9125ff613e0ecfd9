"""search.analysis.rows: one trial decoded as every reader shows it, on trials built in memory."""

import json
import math

import optuna
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState, create_trial

from search.analysis.rows import TrialRow, finished_rows
from search.attrs import ATTR_AUDIT, CURVE, THROUGHPUT_RATIO, TOKENS_PER_S
from search.config import load_config
from tests.search.conftest import ROOT

LAYERS = [{"layer": 0, "heads": 4}, {"layer": 1, "heads": 2}]


def test_a_complete_trial_s_row_reads_its_objectives_by_name_and_where_it_ran():
    t = create_trial(
        values=[2.5, 1200.0, 0.98],
        params={"x": 0.5},
        distributions={"x": FloatDistribution(0, 1)},
        user_attrs={"schedule": "4x3", "seed": 7, "role": "baseline", TOKENS_PER_S: 900.0, THROUGHPUT_RATIO: 0.5},
        intermediate_values={200: 2.7, 100: 3.1},
        constraints={THROUGHPUT_RATIO: 0.1},
    )
    row = TrialRow.of(t, ["val_loss", "tokens_per_s", "throughput"])
    assert (row.number, row.state, row.schedule, row.seed, row.role) == (t.number, "COMPLETE", "4x3", 7, "baseline")
    assert (row.val_loss, row.tokens_per_s, row.throughput) == (2.5, 1200.0, 0.98)  # the objectives, not the attrs
    assert row.values == {"val_loss": 2.5, "tokens_per_s": 1200.0, "throughput": 0.98} and row.feasible is False
    assert row.curve == ((100.0, 3.1), (200.0, 2.7)) and row.heads == (4, 4, 4) and row.params == {"x": 0.5}
    assert row.attrs == t.user_attrs and row.worker is None and row.audit is None
    one = TrialRow.of(create_trial(value=2.5, user_attrs={TOKENS_PER_S: 900.0, THROUGHPUT_RATIO: math.inf}), ["val_loss"])
    assert (one.val_loss, one.tokens_per_s, one.throughput, one.role, one.feasible) == (2.5, 900.0, None, "search", True)
    ran = TrialRow.of(create_trial(value=2.5, user_attrs={"worker": {"host": "h", "pid": 12, "device": "cpu"}}), ["val_loss"])
    assert ran.worker == "h:12 (cpu)"
    assert TrialRow.of(create_trial(value=2.5, user_attrs={"worker": {}}), ["val_loss"]).worker == "?:? (?)"


def test_an_unfinished_trial_s_val_loss_is_the_last_it_reported():
    pruned = create_trial(state=TrialState.PRUNED, value=None, user_attrs={CURVE: [[100, 3.0], [200, 2.8]], TOKENS_PER_S: 800.0})
    row = TrialRow.of(pruned, ["val_loss", "tokens_per_s"])
    assert row.val_loss == 2.8 and row.curve == ((100.0, 3.0), (200.0, 2.8)) and row.tokens_per_s == 800.0
    assert row.values == {"val_loss": None, "tokens_per_s": None}
    failed = TrialRow.of(create_trial(state=TrialState.FAIL, user_attrs={"error": "died"}), ["val_loss"])
    assert failed.val_loss is None and failed.curve == () and failed.error == "died" and failed.schedule is None


def test_the_audit_is_the_trial_s_own_else_the_study_s_first_probe_set():
    own = create_trial(value=2.0, user_attrs={ATTR_AUDIT: json.dumps({"layers": LAYERS})})
    assert TrialRow.of(own, ["val_loss"]).audit == LAYERS
    study_audit = {"source": "s:0", "layers": {"corpus": LAYERS, "other": [{"layer": 0}]}}
    assert TrialRow.of(create_trial(value=2.0), ["val_loss"], study_audit).audit == LAYERS
    assert TrialRow.of(create_trial(value=2.0), ["val_loss"], {"layers": {}}).audit is None
    assert TrialRow.of(create_trial(value=2.0), ["val_loss"], {"layers": ["not a row"]}).audit is None


def test_finished_rows_are_the_study_s_finished_trials_by_its_objectives():
    config = load_config(ROOT / "studies" / "tiny.toml")
    study = optuna.create_study()
    study.add_trials([create_trial(value=2.5), create_trial(state=TrialState.RUNNING), create_trial(state=TrialState.PRUNED, value=3.0)])
    rows = finished_rows(study, config)
    assert [(r.number, r.state) for r in rows] == [(0, "COMPLETE"), (2, "PRUNED")] and rows[0].values == {"val_loss": 2.5}
