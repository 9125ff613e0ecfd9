"""`prism-search delete NAME` and `Study.delete`: a study and its folder go, every other study stays; never while a
driver trains in the storage."""

import optuna
import pytest
from typer.testing import CliRunner

from search.attrs import ATTR_STUDY_UID
from search.cli import app
from search.runner.checkpoints import study_folder
from search.runner.preflight import check_corpus
from search.storage import driver_lock, open_storage
from search.study import Study
from search.study.create import open_study

runner = CliRunner()


@pytest.fixture
def two_studies(tiny_config):
    """`tiny` with a trial folder holding a model file, and `other` beside it in the same storage."""
    tiny = open_study(tiny_config, open_storage(tiny_config.storage), check_corpus(tiny_config)).study
    other = tiny_config.model_copy(update={"name": "other"})
    open_study(other, open_storage(other.storage), check_corpus(other))
    folder = study_folder(tiny_config, tiny.user_attrs[ATTR_STUDY_UID])
    (folder / "trial-00000").mkdir(parents=True)
    (folder / "trial-00000" / "model.safetensors").write_bytes(b"weights")
    return tiny_config, folder


def test_delete_removes_the_study_and_its_folder_and_nothing_else(two_studies):
    config, folder = two_studies
    done = runner.invoke(app, ["delete", "tiny", "--storage", config.storage, "--yes"])
    assert done.exit_code == 0, done.output
    assert "deleted study 'tiny' (2 trials)" in done.output and str(folder) in " ".join(done.output.split())
    assert optuna.get_all_study_names(config.storage) == ["other"] and not folder.exists()
    assert (folder.parent).is_dir()  # the checkpoint folder itself, which other studies share, stays


def test_delete_without_a_terminal_to_ask_needs_yes(two_studies):
    config, folder = two_studies
    done = runner.invoke(app, ["delete", "tiny", "--storage", config.storage])
    assert done.exit_code != 0 and "fix: pass --yes" in str(done.exception)
    assert sorted(optuna.get_all_study_names(config.storage)) == ["other", "tiny"] and folder.is_dir()


def test_delete_is_refused_while_a_driver_holds_the_storage(two_studies):
    config, folder = two_studies
    # as a `run` of either study holds it for its whole life
    with driver_lock(config.storage), pytest.raises(Exception, match="in use by another prism-search driver"):
        Study.load("tiny", storage=config.storage).delete()
    assert sorted(optuna.get_all_study_names(config.storage)) == ["other", "tiny"] and folder.is_dir()


def test_a_missing_study_is_one_line_and_deletes_nothing(two_studies):
    config, _ = two_studies
    done = runner.invoke(app, ["delete", "nope", "--storage", config.storage, "--yes"])
    assert done.exit_code != 0 and "nope" in str(done.exception)
    assert sorted(optuna.get_all_study_names(config.storage)) == ["other", "tiny"]


def test_delete_is_refused_while_a_live_driver_trains_it_on_postgresql(tiny_config, pg_url):
    """PostgreSQL admits several drivers, so no lock says one is there: a RUNNING trial with a fresh heartbeat does."""
    from search.storage import storage_of, trial_id

    config = tiny_config.model_copy(update={"storage": pg_url})
    study = open_study(config, open_storage(pg_url), check_corpus(config)).study
    running = study.ask()
    storage_of(study).record_heartbeat(trial_id(running))
    with pytest.raises(Exception, match=rf"has trials a live driver is training \({running.number}\)"):
        Study.load("tiny", storage=pg_url).delete()
    assert optuna.get_all_study_names(pg_url) == ["tiny"]
    study.tell(running, 1.0)
    Study.load("tiny", storage=pg_url).delete()
    assert optuna.get_all_study_names(pg_url) == []
