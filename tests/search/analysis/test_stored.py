"""search.analysis.stored on a real SQLite storage holding a study prism-search created and one another tool made."""

import optuna
import pytest

from search.analysis.stored import is_stored, stored_studies, stored_study, summaries
from search.attrs import ATTR_CONFIG
from search.errors import PrismSearchError


@pytest.fixture
def storage_url(tmp_path) -> str:
    url = f"sqlite:///{tmp_path / 'studies.db'}"
    ours = optuna.create_study(study_name="ours", storage=url)
    ours.set_user_attr(ATTR_CONFIG, "{}")
    ours.add_trial(optuna.trial.create_trial(value=2.0))
    optuna.create_study(study_name="foreign", storage=url)
    return url


def test_stored_studies_are_ours_and_the_names_of_the_others(storage_url):
    ours, others = stored_studies(storage_url)
    assert [s.study_name for s in ours] == ["ours"] and others == ["foreign"]
    assert ours[0].trials[0].value == 2.0 and ours[0].user_attrs[ATTR_CONFIG] == "{}"


def test_a_stored_study_is_found_by_name_or_named_missing(storage_url):
    assert stored_study("ours", storage_url).best_value == 2.0
    with pytest.raises(PrismSearchError, match=r"no study named 'gone' in this storage \(studies: ours, foreign\)"):
        stored_study("gone", storage_url)


def test_is_stored_only_for_a_study_prism_search_created(storage_url, tmp_path):
    assert is_stored("ours", storage_url)
    assert not is_stored("foreign", storage_url) and not is_stored("gone", storage_url)
    assert not is_stored("ours", f"sqlite:///{tmp_path / 'missing.db'}")  # no storage to read: not stored, no error


def test_reading_a_storage_that_is_not_there_creates_nothing(tmp_path):
    """The reading commands open with create=False: a mistyped path is refused, never made into a new database."""
    missing = tmp_path / "typo.db"
    url = f"sqlite:///{missing}"
    with pytest.raises(PrismSearchError):
        stored_study("ours", url)
    with pytest.raises(PrismSearchError):
        stored_studies(url)
    assert not is_stored("ours", url) and not missing.exists()


def test_summaries_name_each_study_that_cannot_be_summarised_and_keep_the_others(storage_url):
    """`status` without a name lists every study: one whose stored config fails validation is named with why."""
    from search import Study
    from search.config import load_config
    from tests.search.conftest import ROOT

    good = optuna.create_study(study_name="good", storage=storage_url)
    good.set_user_attr(ATTR_CONFIG, load_config(ROOT / "studies" / "tiny.toml").model_copy(update={"name": "good"}).model_dump_json())
    good.add_trial(optuna.trial.create_trial(value=2.0, user_attrs={"schedule": "1x3", "seed": 0, "role": "baseline"}))
    studies = [Study.load("ours", storage=storage_url), Study.load("good", storage=storage_url)]
    summarised, bad = summaries(studies)
    assert [(study.name, s.best_schedule, s.baseline_value) for study, s in summarised] == [("good", "1x3", 2.0)]
    assert list(bad) == ["ours"] and bad["ours"].startswith("stored config of study 'ours': name: required field is missing")
