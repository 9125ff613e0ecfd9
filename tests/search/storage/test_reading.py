"""Reading commands read trials with SQLAlchemy Core (search.storage._optuna.read_trials), not Optuna's ORM: the
trials, and so every number a command prints, must be exactly what Optuna's own read gives."""

import optuna
import pytest
from optuna.trial import TrialState

from search.analysis import stored_study, summarize
from search.dashboard import Dashboard
from search.storage import open_storage
from search.storage.database import heartbeat_seconds
from search.storage.records import stored_config
from search.study.export import render
from search.text import summary_json
from tests.search.dashboard.conftest import quickstart
from tests.search.synthetic import synthetic_study


@pytest.fixture(scope="module")
def study_url(tmp_path_factory) -> str:
    """A prism study with every kind of trial (pruned, failed, running), audits and curves, and a two-objective one."""
    url = f"sqlite:///{tmp_path_factory.mktemp('reading') / 'reading.db'}"
    storage = open_storage(url)
    synthetic_study(quickstart("s"), storage, 40, running=2, failed=2, audit=True)
    synthetic_study(quickstart("two"), storage, 12, failed=1, multi_objective=True, seed=1)
    storage.engine.dispose()
    return url


def fields(trial: optuna.trial.FrozenTrial) -> dict:
    """Every field, dicts as lists of items: equal trials whose attrs came back in another order differ here."""
    return {k: list(v.items()) if isinstance(v, dict) else v for k, v in vars(trial).items()}


@pytest.mark.parametrize("name", ["s", "two"])
def test_core_read_gives_optunas_trials_field_by_field_in_the_same_order(study_url, name):
    reading, orm = open_storage(study_url, create=False), optuna.storages.RDBStorage(study_url, skip_table_creation=True)
    study_id = orm.get_study_id_from_name(name)
    every = orm.get_all_trials(study_id, deepcopy=False)
    running = {t._trial_id for t in every if t.state == TrialState.RUNNING}
    for states, included, after in [
        (None, set(), -1),  # a first read: every trial
        (None, running, every[len(every) // 2]._trial_id),  # a cache's refresh: unfinished ones and newer ones
        ((TrialState.COMPLETE, TrialState.PRUNED), set(), -1),
    ]:
        ours = reading._get_trials(study_id, states, included, after)
        theirs = orm._get_trials(study_id, states, included, after)
        assert len(ours) == len(theirs) > 0
        assert [fields(t) for t in ours] == [fields(t) for t in theirs]
    with pytest.raises(KeyError):
        reading._get_trials(10_000, None, set(), -1)
    orm.engine.dispose()
    reading.engine.dispose()


@pytest.mark.parametrize("name", ["s", "two"])
def test_summary_export_and_study_page_are_identical_to_the_ones_optunas_read_gives(study_url, name):
    heartbeat_s, grace_s = heartbeat_seconds()  # the product's, so both read the running trials alike
    rdb = optuna.storages.RDBStorage(study_url, skip_table_creation=True, heartbeat_interval=heartbeat_s, grace_period=grace_s)
    orm = optuna.load_study(study_name=name, storage=rdb)
    ours = stored_study(name, study_url)
    assert summary_json(summarize(ours)) == summary_json(summarize(orm))
    config = stored_config(ours)
    for fmt in ("csv", "json"):
        assert render(ours, config, fmt) == render(orm, config, fmt)


def test_the_dashboards_change_stamp_moves_with_every_change_a_page_shows(tmp_path):
    url = f"sqlite:///{tmp_path / 'live.db'}"
    study = synthetic_study(quickstart("live"), url, 3, failed=0)
    app = Dashboard(url)
    seen = {app.stamp("live")}
    trial = study.ask()  # a trial starts
    seen.add(app.stamp("live"))
    trial.report(2.0, 1000)  # it reports a point
    seen.add(app.stamp("live"))
    trial.set_user_attr("schedule", "2x4")
    seen.add(app.stamp("live"))
    study.tell(trial, 1.9)  # it finishes
    seen.add(app.stamp("live"))
    assert len(seen) == 5 and app.stamp("live") in seen  # each change moved it; no change, no move
    app.close()
