"""A stored study is read as stored: its config is not checked against the disk again."""

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from search.cli import app
from search.dashboard import Dashboard
from search.runner.preflight import check_corpus
from search.storage import open_storage
from search.study.create import open_study

runner = CliRunner()


@pytest.mark.e2e
def test_a_study_whose_corpus_moved_still_reports_and_resume_names_the_missing_corpus(tmp_path, tiny_config):
    text = tmp_path / "corpus.txt"
    text.write_text("to be or not to be, that is the question. " * 400)
    data = tiny_config.data.model_copy(update={"corpus": str(text)})
    config = tiny_config.model_copy(update={"data": data})
    open_study(config, open_storage(config.storage), check_corpus(config))
    text.rename(tmp_path / "moved.txt")
    url = ["--storage", config.storage]

    status = runner.invoke(app, ["status", "tiny", *url, "--json"])
    assert status.exit_code == 0, status.output
    assert json.loads(status.output)["name"] == "tiny"
    export = runner.invoke(app, ["export", "tiny", *url, "--format", "json"])
    assert export.exit_code == 0 and json.loads(export.output) == []
    best = runner.invoke(app, ["best", "tiny", *url])
    assert "no complete feasible trial yet" in str(best.exception)  # the study's own state, not its config
    # resume has trials to train, so it needs the corpus; a fresh process (this one holds the corpus in memory)
    resume = subprocess.run([sys.executable, "-m", "search.cli", "resume", "tiny", *url], capture_output=True, text=True)
    assert resume.returncode == 2 and resume.stderr.count("\n") == 1, resume.stderr
    assert f"data.corpus: corpus {str(text)!r} not found" in resume.stderr and "version" not in resume.stderr


def test_resume_and_run_queue_the_baseline_runs_a_killed_creation_never_queued_once(tiny_config):
    """A driver killed between the baseline enqueues: the study holds baseline seed 0 only.
    `resume` queues the missing runs once; running it again, or reopening with `run`'s open_study, adds nothing."""
    import optuna
    from optuna.trial import TrialState, create_trial

    from search.attrs import ATTR_FINGERPRINT
    from search.config import references_for
    from search.storage.records import enqueue, schedule_attrs
    from search.study.create import store_config

    space = tiny_config.space.model_copy(update={"references": ["paper-ramp"]})
    config = tiny_config.model_copy(update={"space": space, "n_trials": 1})
    fingerprint = check_corpus(config)
    study = optuna.create_study(study_name="tiny", storage=open_storage(config.storage))
    study.set_user_attr(ATTR_FINGERPRINT, fingerprint)
    store_config(study, config)
    enqueue(study, config.family, config.baseline, role="baseline", seed=config.seed)  # then the kill
    dist = {"x": optuna.distributions.IntDistribution(0, 2)}
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


def _waiting(config) -> list[tuple]:
    import optuna
    from optuna.trial import TrialState

    trials = optuna.load_study(study_name=config.name, storage=config.storage).get_trials(states=(TrialState.WAITING,))
    return [(t.user_attrs["role"], t.user_attrs["schedule"], t.user_attrs["seed"]) for t in trials]


def test_a_baseline_that_failed_for_good_waits_for_resume_and_status_says_so(tiny_config, monkeypatch):
    """Every try of the paired baseline failed (a divergence, a broken trainer, a worker lost past its retries): `run`
    leaves it failed instead of training it again on every start, status names it and the fix, and `resume` (with a
    fixed trainer, say) queues it once more, while no baseline at that seed has completed."""
    from optuna.trial import TrialState

    from search import cli

    monkeypatch.setattr(cli.console, "width", 400)  # one table row per line
    config = tiny_config.model_copy(update={"n_trials": 1})
    study = open_study(config, open_storage(config.storage), check_corpus(config)).study  # baseline seeds 0 and 1
    for seed in (0, 1):  # taken from the queue as the driver takes them: seed 0 diverges, seed 1 trains
        trial = study.ask()
        assert (trial.user_attrs["role"], trial.user_attrs["seed"]) == ("baseline", seed)
        if seed == 0:
            trial.set_user_attr("error", "TrainingDiverged: val loss 9.7 at step 10")
            study.tell(trial, state=TrialState.FAIL)
        else:
            study.tell(trial, 2.1)  # the target (one trained trial) is reached: resume trains nothing
    url = ["--storage", config.storage]
    failed = f"baseline {config.baseline} seed 0 (trial 0: TrainingDiverged: val loss 9.7 at step 10)"

    open_study(config, open_storage(config.storage), check_corpus(config))  # `run` reopening the study
    assert _waiting(config) == []
    status = runner.invoke(app, ["status", "tiny", *url])
    row = next(line for line in status.output.splitlines() if "failed for good" in line)
    assert f"{failed}; not queued again by `run`: `prism-search resume tiny` queues them" in row
    error = "TrainingDiverged: val loss 9.7 at step 10"
    status = runner.invoke(app, ["status", "tiny", *url, "--json"])
    assert json.loads(status.stdout)["failed_runs"] == [
        {"number": 0, "role": "baseline", "schedule": str(config.baseline), "seed": 0, "error": error}
    ]
    page = b"".join(Dashboard(config.storage)({"REQUEST_METHOD": "GET", "PATH_INFO": "/study/tiny"}, lambda s, h: None)).decode()
    assert f'<td id="failed">{failed}; not queued again by' in page

    retried = runner.invoke(app, ["resume", "tiny", *url])
    assert f"queued the baseline runs the study lacked: baseline {config.baseline} seed 0" in retried.output, retried.output
    assert _waiting(config) == [("baseline", str(config.baseline), 0)] and "failed for good" not in retried.output
    again = runner.invoke(app, ["resume", "tiny", *url])  # the queued try holds it
    assert again.exit_code == 0 and "lacked" not in again.output and len(_waiting(config)) == 1


def test_a_failed_served_copy_of_the_baseline_is_queued_again_while_its_schedule_trains(tiny_config):
    """A baseline served from another trial of its schedule and seed fails with that trial's first try and is not
    queued beside its retry (search.runner.cache): it did not fail for good, so resume queues it (to be served)."""
    import optuna
    from optuna.trial import TrialState, create_trial

    from search.storage.records import schedule_attrs

    config = tiny_config.model_copy(update={"n_trials": 1})
    study = open_study(config, open_storage(config.storage), check_corpus(config)).study
    copy = study.ask()  # baseline seed 0, served from a search trial that trained the schedule
    copy.set_user_attr("duplicate_of", 5)
    copy.set_user_attr("error", "original trial 5 failed; not queued again: trial 6 holds its schedule")
    study.tell(copy, state=TrialState.FAIL)
    dist = {"x": optuna.distributions.IntDistribution(0, 2)}
    holder = schedule_attrs(config.baseline, "search", 0)  # the original's retry, trained
    study.add_trial(create_trial(params={"x": 1}, distributions=dist, value=2.0, user_attrs=holder))
    result = runner.invoke(app, ["resume", "tiny", "--storage", config.storage])
    assert result.exit_code == 0 and "failed for good" not in result.output, result.output
    assert ("baseline", str(config.baseline), 0) in _waiting(config)


def test_how_trials_are_executed_may_change_what_they_measure_may_not(tiny_config, tmp_path):
    """A study whose trainer's function was broken is run again with the fixed one under its name: allowed, said,
    and kept with the study. A change to what its trials measure is refused naming the fields."""
    import json

    import pytest

    from search.config import parse_config
    from search.errors import PrismSearchError
    from search.runner.preflight import check_corpus
    from search.storage import open_storage

    (tmp_path / "mine.py").write_text("def broken(request, reporter):\n    pass\n\ndef fixed(request, reporter):\n    pass\n")

    def config_with(function: str, **train) -> object:
        data = tiny_config.model_dump()
        data["trainer"] = {"kind": "python", "function": f"mine:{function}", "path": [str(tmp_path)], "time_limit_s": 60.0}
        data["train"] |= train
        return parse_config(data, "test")

    first = config_with("broken")
    open_study(first, open_storage(first.storage), check_corpus(first))
    said = []
    ctx = open_study(config_with("fixed"), open_storage(first.storage), check_corpus(first), note=said.append)
    assert said == ["study tiny: the trainer now runs with a new trainer.function from trial 2 on"]
    assert json.loads(ctx.study.user_attrs["prism.changes"]) == [{"from_trial": 2, "fields": ["trainer.function"]}]
    assert ctx.config.trainer.function == "mine:fixed"
    with pytest.raises(PrismSearchError, match=r"exists with another train\.steps: what its trials measure cannot change"):
        open_study(config_with("fixed", steps=61), open_storage(first.storage), check_corpus(first))
