"""The study's lifecycle as the CLI drives it: what `resume` stores before it trains, and an interrupt's answer."""

import json

import optuna
import pytest
from optuna.distributions import IntDistribution
from typer.testing import CliRunner

from search.cli import app
from search.runner.preflight import check_corpus
from search.storage import open_storage
from search.storage.records import schedule_attrs
from search.study.create import open_study

runner = CliRunner()


def test_resume_n_trials_stores_the_new_target_for_status_and_the_dashboard(tiny_config):
    """Two finished trials and `resume --n-trials 2`: nothing to train, and the stored target is now 2, not 6."""
    config = tiny_config.model_copy(update={"n_trials": 6})
    study = open_study(config, open_storage(config.storage), check_corpus(config)).study
    for seed in (config.seed, config.seed + 1):  # the two baselines, finished without training
        attrs = schedule_attrs(config.baseline, "baseline", seed) | {"tokens_per_s": 1000.0}
        study.add_trial(optuna.trial.create_trial(params={"x": 1}, distributions={"x": IntDistribution(0, 2)}, value=2.0, user_attrs=attrs))
    url = ["--storage", config.storage]

    resume = runner.invoke(app, ["resume", "tiny", *url, "--n-trials", "2"])
    assert resume.exit_code == 0, resume.output
    assert "already has 2/2 trained trials; nothing to run" in resume.output
    status = runner.invoke(app, ["status", "tiny", *url, "--json"])
    assert json.loads(status.output)["n_trials"] == 2
    stored = json.loads(optuna.load_study(study_name="tiny", storage=config.storage).user_attrs["prism.config"])
    assert stored["n_trials"] == 2  # what the dashboard reads as the study's target


def test_confirm_is_refused_while_a_study_confirmed_in_rounds_has_a_round_left(tiny_config, monkeypatch, capsys, tmp_path):
    """Runs on `confirm`'s seeds before the pick is frozen would be seeds it was selected on; round 2's seeds must
    never be. One line before any compute (no corpus read), and nothing queued."""
    search = tiny_config.search.model_copy(update={"confirmation": "rounds"})
    config = tiny_config.model_copy(update={"n_trials": 2, "search": search})
    study = open_study(config, open_storage(config.storage), check_corpus(config)).study
    for schedule, seed in ((config.baseline, config.seed), (config.baseline, config.seed + 1)):  # the two baselines, finished
        attrs = schedule_attrs(schedule, "baseline", seed) | {"tokens_per_s": 1000.0}
        study.add_trial(optuna.trial.create_trial(params={"x": 1}, distributions={"x": IntDistribution(0, 2)}, value=2.0, user_attrs=attrs))
    from tests.search.test_cli_errors import run_cli

    code, out, err = run_cli(monkeypatch, capsys, tmp_path, "confirm", "tiny", "--storage", config.storage, "--top", "1", "--seeds", "3")
    assert code != 0 and out == "" and err.count("\n") == 1, (out, err)  # no corpus read, nothing said before
    assert 'confirms in rounds (search.confirmation = "rounds") and they are not over' in err
    assert "`prism-search resume tiny` trains the rounds" in err
    queued = optuna.load_study(study_name="tiny", storage=config.storage).get_trials(states=(optuna.trial.TrialState.WAITING,))
    assert not [t for t in queued if t.user_attrs.get("role") == "confirm"]


def test_an_interrupt_after_the_study_is_open_says_resume_without_reading_the_database(tiny_config, monkeypatch):
    """`ray job stop` SIGKILLs the driver 3 s after its SIGTERM by default: once the study is open, the resume
    command is known in process. Before that, the database says whether the study was created."""
    import search.analysis.stored
    from search.study import Study, StudyInterrupted

    reads = []
    monkeypatch.setattr(search.analysis.stored, "is_stored", lambda name, url: reads.append(name) or False)

    def interrupted(study: Study, *, stored: bool | None) -> StudyInterrupted:
        def press_ctrl_c():
            raise KeyboardInterrupt

        with pytest.raises(StudyInterrupted) as caught:
            study._interruptible(press_ctrl_c, None, stored=stored)
        return caught.value

    study = Study.create(tiny_config)
    assert not interrupted(study, stored=None).stored and reads == ["tiny"]  # a run before the study was opened: asked
    assert interrupted(study, stored=True).stored and reads == ["tiny"]  # resume and confirm: a stored study, not asked
    study._open = True  # as `run` marks it once the study is open
    assert interrupted(study, stored=None).stored and reads == ["tiny"]


def test_a_prior_for_a_study_at_its_target_is_refused_naming_the_trials_that_would_train_it(tiny_config, study_toml, tmp_path, capsys):
    """`run --prior` on a study that has its trained trials could queue the prior's schedules but never train them:
    one line naming the --n-trials that would, exit 2, and nothing queued."""
    import sys

    from search.cli import main

    config = tiny_config.model_copy(update={"n_trials": 2})
    study = open_study(config, open_storage(config.storage), check_corpus(config)).study
    for seed in (config.seed, config.seed + 1):  # the two baselines, finished without training
        attrs = schedule_attrs(config.baseline, "baseline", seed) | {"tokens_per_s": 1000.0}
        study.add_trial(optuna.trial.create_trial(params={"x": 1}, distributions={"x": IntDistribution(0, 2)}, value=2.0, user_attrs=attrs))
    prior = tmp_path / "prior.json"
    entries = [{"schedule": s, "rank": i + 1, "variant": "test", "distance": 0.0} for i, s in enumerate(["1x1,2x1,4x1", "1x2,4x1"])]
    prior.write_text(json.dumps({"format": "prism-prior/1", "n_layer": 3, "schedules": entries}))
    toml = study_toml(("n_trials = 5", "n_trials = 2"))
    before = len(study.trials)
    sys.argv = ["prism-search", "run", str(toml), "--storage", config.storage, "--prior", str(prior)]
    with pytest.raises(SystemExit) as exit_info:
        main()
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and len(err.splitlines()) == 1, err
    assert "already has 2/2 trained trials" in err and "--n-trials 4 to train its 2" in err
    assert len(optuna.load_study(study_name="tiny", storage=config.storage).trials) == before  # nothing queued
