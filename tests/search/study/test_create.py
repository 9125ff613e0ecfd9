"""A stored study is read as stored: its config is not checked against the disk again (issue 13, item 4)."""

import json
import subprocess
import sys

from typer.testing import CliRunner

from search.cli import app
from search.runner.corpus import corpus_fingerprint
from search.storage import open_storage
from search.study.create import open_study

runner = CliRunner()


def test_a_study_whose_corpus_moved_still_reports_and_resume_names_the_missing_corpus(tmp_path, tiny_config):
    text = tmp_path / "corpus.txt"
    text.write_text("to be or not to be, that is the question. " * 400)
    data = tiny_config.data.model_copy(update={"corpus": str(text)})
    config = tiny_config.model_copy(update={"data": data})
    open_study(config, open_storage(config.storage), corpus_fingerprint(config))
    text.rename(tmp_path / "moved.txt")
    url = ["--storage", config.storage]

    status = runner.invoke(app, ["status", "tiny", *url, "--json"])
    assert status.exit_code == 0, status.output
    assert json.loads(status.output)[0]["name"] == "tiny"
    export = runner.invoke(app, ["export", "tiny", *url, "--format", "json"])
    assert export.exit_code == 0 and json.loads(export.output) == []
    best = runner.invoke(app, ["best", "tiny", *url])
    assert "no complete feasible trial yet" in str(best.exception)  # the study's own state, not its config
    # resume has trials to train, so it needs the corpus; a fresh process (this one holds the corpus in memory)
    resume = subprocess.run([sys.executable, "-m", "search.cli", "resume", "tiny", *url], capture_output=True, text=True)
    assert resume.returncode == 2 and resume.stderr.count("\n") == 1, resume.stderr
    assert f"data.corpus: corpus {str(text)!r} not found" in resume.stderr and "version" not in resume.stderr


def test_resume_and_run_queue_the_baseline_runs_a_killed_creation_never_queued_once(tiny_config):
    """A driver killed between the baseline enqueues (issue 12, item 9): the study holds baseline seed 0 only, and a
    failed baseline at seed 1 (no longer held). `resume` queues the missing runs once; running it again, or reopening
    with `run`'s open_study, adds nothing."""
    import optuna
    from optuna.trial import TrialState, create_trial

    from search.attrs import ATTR_FINGERPRINT
    from search.config import family_for, references_for
    from search.storage.records import enqueue, schedule_attrs
    from search.study.create import store_config

    space = tiny_config.space.model_copy(update={"references": ["paper-ramp"]})
    config = tiny_config.model_copy(update={"space": space, "n_trials": 1})
    fingerprint = corpus_fingerprint(config)
    study = optuna.create_study(study_name="tiny", storage=open_storage(config.storage))
    study.set_user_attr(ATTR_FINGERPRINT, fingerprint)
    store_config(study, config)
    enqueue(study, family_for(config), config.baseline, role="baseline", seed=config.seed)  # then the kill
    dist = {"x": optuna.distributions.IntDistribution(0, 2)}
    failed = schedule_attrs(config.baseline, "baseline", config.seed + 1)
    study.add_trial(create_trial(state=TrialState.FAIL, params={"x": 1}, distributions=dist, user_attrs=failed))
    done = schedule_attrs(config.baseline, "search", config.seed)  # the target is reached: resume trains nothing
    study.add_trial(create_trial(params={"x": 1}, distributions=dist, value=2.0, user_attrs=done | {"tokens_per_s": 1.0}))
    (reference,) = [str(ref.schedule) for ref in references_for(config)]

    def held():
        trials = optuna.load_study(study_name="tiny", storage=config.storage).get_trials(states=(TrialState.WAITING,))
        return sorted((t.user_attrs["role"], t.user_attrs["schedule"], t.user_attrs["seed"]) for t in trials)

    url = ["--storage", config.storage]
    first = runner.invoke(app, ["resume", "tiny", *url])
    assert first.exit_code == 0, first.output
    assert "queued the baseline runs the study lacked" in first.output
    baseline = str(config.baseline)
    expected = sorted([("baseline", baseline, 0), ("baseline", baseline, 1), ("reference", reference, 0), ("reference", reference, 1)])
    assert held() == expected
    again = runner.invoke(app, ["resume", "tiny", *url])
    assert again.exit_code == 0 and "lacked" not in again.output, again.output
    open_study(config, open_storage(config.storage), fingerprint)  # `run` reopening the study
    assert held() == expected
