"""keep_checkpoints on a real local Ray study; user corpora and trial checkpoints through the one trial entry point."""

import contextlib
import dataclasses
import errno
import math
import os
import sqlite3
from pathlib import Path

import optuna
import pytest
import safetensors.torch
import torch
from optuna.trial import TrialState

from prism import PrismLM, load_checkpoint, save_checkpoint
from search.analysis.summary import summarize
from search.config import parse_config
from search.errors import AuditError, ConfigError
from search.priors.audit import owned_checkpoint
from search.runner.checkpoints import keep_checkpoints, study_folder, trial_checkpoint_dir
from search.runner.driver import Driver
from search.runner.messages import Finished
from search.runner.preflight import check_corpus
from search.runner.worker import TrialSession, TrialSpec, run_trial
from search.storage import open_storage
from search.storage.records import claim_uid, is_copy, study_uid
from search.study.create import open_study, store_config
from search.study.pruning import make_stopping
from tests.search.test_priors_cli import cli


def _spec(config, tmp_path, keep):
    return TrialSpec(
        study="t",
        number=0,
        schedule="1x1,2x1,4x1",
        model=config.model_config_,
        train=config.train.to_train_config(0),
        corpus=config.data.corpus,
        val_fraction=0.1,
        corpus_fingerprint=check_corpus(config),
        corpus_options=config.data.corpus_options(),
        checkpoint_dir=str(tmp_path / keep),
        keep_checkpoints=keep,
    )


@pytest.mark.parametrize("keep, pruned_saved", [("all", True), ("best", False), ("none", False)])
def test_session_saves_finished_trials_and_pruned_ones_only_for_all(tiny_config, tmp_path, keep, pruned_saved):
    session = TrialSession()
    session.start(_spec(tiny_config, tmp_path, keep))
    session.advance()
    pruned = session.stop().result  # the driver pruned it after its first evaluation
    assert ("checkpoint" in pruned.extra) == pruned_saved == (tmp_path / keep / "model.safetensors").is_file()
    session.start(_spec(tiny_config, tmp_path, keep))
    while not isinstance(finished := session.advance(), Finished):
        pass
    result = finished.result
    assert ("checkpoint" in result.extra) == (keep != "none")
    if keep != "none":
        model, meta = load_checkpoint(result.extra["checkpoint"])
        assert str(model.schedule) == "1x1,2x1,4x1" and meta["result"]["final_val_loss"] == result.final_val_loss
        assert meta["corpus_fingerprint"] == check_corpus(tiny_config)


@pytest.mark.e2e
def test_study_keeps_only_the_best_and_baseline_checkpoints_and_trains_on_a_user_corpus(ray_local, tiny_config, tmp_path):
    text = tmp_path / "corpus.txt"
    text.write_text("".join(f"{i} little pigs went to market, {i * 7 % 13} came home\n" for i in range(3000)))
    config = tiny_config.model_copy(
        update={
            "n_trials": 4,  # keep_checkpoints: the default, "best"
            "checkpoint_dir": str(tmp_path / "ckpt"),
            "data": tiny_config.data.model_copy(update={"corpus": str(text)}),
        }
    )
    fingerprint = check_corpus(config)
    ctx = open_study(config, open_storage(config.storage), fingerprint)
    study = ctx.study
    Driver(ctx, stopping=make_stopping(ctx)).run(config.n_trials, n_workers=2)
    best = summarize(study).best_number
    kept = sorted(p.name for p in Path(trial_checkpoint_dir(config, study_uid(study), 0)).parent.iterdir())
    baseline = next(t.number for t in study.trials if t.user_attrs["role"] == "baseline" and t.user_attrs["seed"] == config.seed)
    assert kept == sorted({f"trial-{best:05d}", f"trial-{baseline:05d}"}) and len(study.trials) == 4
    trial = study.trials[best]
    model, meta = load_checkpoint(trial.user_attrs["checkpoint"])
    assert trial.state == TrialState.COMPLETE and meta["result"]["final_val_loss"] == trial.value
    assert meta["data"]["name"] == str(text) and str(model.schedule) == trial.user_attrs["schedule"]


def test_best_keeps_a_checkpoint_that_a_duplicate_shares(tiny_config, tmp_path):
    """A duplicate carries its original's checkpoint path: deleting by trial would delete the best's directory."""
    ctx = open_study(tiny_config, open_storage(tiny_config.storage), check_corpus(tiny_config))
    study = ctx.study
    study.tell(study.ask(), 9.0)  # the enqueued baseline (trial 0) had no checkpoint here: give it none
    folder = study_folder(tiny_config, study_uid(study))
    dirs = {name: folder / f"trial-{number:05d}" for number, name in ((1, "best"), (2, "worse"), (4, "baseline"))}
    for path in dirs.values():
        path.mkdir(parents=True)
    for value, name, extra in [(1.0, "best", {}), (2.0, "worse", {}), (1.0, "best", {"duplicate_of": 1})]:
        study.add_trial(
            optuna.trial.create_trial(
                value=value,
                user_attrs={"role": "search", "seed": tiny_config.seed, "schedule": f"s-{name}", "checkpoint": str(dirs[name]), **extra},
            )
        )
    study.add_trial(
        optuna.trial.create_trial(
            value=3.0, user_attrs={"role": "baseline", "seed": tiny_config.seed, "schedule": "2x4", "checkpoint": str(dirs["baseline"])}
        )
    )
    keep_checkpoints(dataclasses.replace(ctx, config=tiny_config.model_copy(update={"keep_checkpoints": "best"})), study_uid(study))
    assert sorted(p for p in folder.iterdir()) == sorted([dirs["best"], dirs["baseline"]])


@pytest.mark.parametrize("keep", ["all", "best"])
def test_the_model_of_a_trial_that_ended_fail_is_removed_and_a_running_ones_is_not(tiny_config, tmp_path, keep):
    """An interrupt can stop a trial after its worker saved the model: the trial is FAIL, its folder named by no
    attr. The clean-up removes it whatever keep_checkpoints keeps; a RUNNING trial's folder is being written."""
    config = tiny_config.model_copy(update={"keep_checkpoints": keep})
    ctx = open_study(config, open_storage(config.storage), check_corpus(config))
    study, uid = ctx.study, claim_uid(ctx.study)
    folders = [Path(trial_checkpoint_dir(config, uid, n)) for n in (0, 1, 2)]
    for folder in folders:
        folder.mkdir(parents=True)
    baseline = study.ask()  # the enqueued paired baseline, trial 0
    baseline.set_user_attr("checkpoint", str(folders[0]))
    study.tell(baseline, 3.0)
    failed, _running = study.ask(), study.ask()
    study.tell(failed, state=TrialState.FAIL)
    keep_checkpoints(ctx, uid)
    assert [f.is_dir() for f in folders] == [True, False, True], keep


def test_a_copied_study_claims_its_own_folder_and_never_cleans_the_originals(tiny_config, tmp_path):
    """`sqlite3 .backup` and `optuna.copy_study` carry the study's id: the copy claims one of its own the first time
    it writes, the original keeps its own, and the copy's clean-up never reaches the original's models."""
    ctx = open_study(tiny_config, open_storage(tiny_config.storage), check_corpus(tiny_config))
    original = ctx.study
    uid = claim_uid(original)
    original.tell(original.ask(), 3.0)  # the paired baseline, kept by "best"
    trial = original.ask()  # a worse search trial: "best" removes its model, in its own study's folder only
    folder = Path(trial_checkpoint_dir(tiny_config, uid, trial.number))
    folder.mkdir(parents=True)
    trial.set_user_attr("checkpoint", str(folder))
    original.tell(trial, 5.0)
    copied = tmp_path / "copy.db"
    source, target = sqlite3.connect(tiny_config.storage.removeprefix("sqlite:///")), sqlite3.connect(copied)
    with contextlib.closing(source), contextlib.closing(target):
        source.backup(target)  # what `sqlite3 .backup` does
    optuna.copy_study(from_study_name="tiny", from_storage=tiny_config.storage, to_storage=f"sqlite:///{tmp_path / 'copied.db'}")
    for url in (f"sqlite:///{copied}", f"sqlite:///{tmp_path / 'copied.db'}"):
        config = tiny_config.model_copy(update={"storage": url})
        copy = open_study(config, open_storage(url), check_corpus(config)).study
        assert study_uid(copy) == uid and is_copy(copy)  # before it writes: the original's id, not its home
        with pytest.raises(AuditError, match="is a copy of one stored elsewhere"):
            owned_checkpoint(folder, copy)  # the model its trial names is the original's
        mine = claim_uid(copy)
        assert mine not in (None, uid) and study_uid(copy) == mine and not is_copy(copy) and claim_uid(copy) == mine
        study_folder(config, mine).mkdir(parents=True)
        keep_checkpoints(open_study(config, open_storage(url), check_corpus(config)), mine)
        assert folder.is_dir()  # named by the copy's trial 1, in the original's folder: not the copy's to remove
    assert claim_uid(original) == uid and not is_copy(original)


def test_study_config_corpus_errors_are_one_line(tmp_path):
    with pytest.raises(ConfigError, match=r"data.corpus: unknown corpus"):
        parse_config({"name": "x", "data": {"corpus": str(tmp_path / "missing.txt")}})
    (tmp_path / "ids.bin").write_bytes(bytes(range(200)) * 1000)  # uint16 ids up to 51143, long enough for the windows
    data = {"corpus": str(tmp_path / "ids.bin"), "vocab_size": 60000}
    assert parse_config({"name": "x", "data": data}).model.vocab_size == 60000  # left out, the model's follows the data's
    config = parse_config({"name": "x", "data": data, "model": {"vocab_size": 256}})
    with pytest.raises(ConfigError, match=r"model.vocab_size=256 is smaller than the corpus vocab 60000; set model.vocab_size = 60000"):
        check_corpus(config)
    relative = parse_config({"name": "x", "checkpoint_dir": "ckpt"})
    assert Path(relative.checkpoint_dir).is_absolute()


def test_a_full_disk_costs_the_checkpoint_never_the_result(tiny_config, tmp_path, monkeypatch):
    """ENOSPC cannot be caused for real here (no small file system to fill): the weights' write
    raises it after config.json is written, and the half-written folder must go, the result stay."""

    def full_disk(model, filename):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), filename)

    monkeypatch.setattr(safetensors.torch, "save_model", full_disk)
    result = run_trial(_spec(tiny_config, tmp_path, "best"))
    assert result.steps == tiny_config.train.steps and math.isfinite(result.final_val_loss)
    assert "checkpoint" not in result.extra and "No space left on device" in result.extra["checkpoint_error"]
    assert not (tmp_path / "best").exists()


@pytest.mark.e2e
def test_a_study_whose_checkpoints_cannot_be_written_keeps_every_result(ray_local, tiny_config, tmp_path):
    """A real refusal inside the Ray workers: the study's checkpoint folder is a file, so every save fails
    (NotADirectoryError); the trials still COMPLETE with their values, the reason stored on each."""
    (tmp_path / "ckpt").mkdir()
    config = tiny_config.model_copy(update={"n_trials": 3, "checkpoint_dir": str(tmp_path / "ckpt")})
    fingerprint = check_corpus(config)
    ctx = open_study(config, open_storage(config.storage), fingerprint)
    Path(trial_checkpoint_dir(config, study_uid(ctx.study), 0)).parent.write_text("in the way")
    study = ctx.study
    Driver(ctx, stopping=make_stopping(ctx)).run(config.n_trials, n_workers=2)
    finished = [t for t in study.trials if t.state == TrialState.COMPLETE]
    assert len(finished) == 3 and not [t for t in study.trials if t.state == TrialState.FAIL]
    assert all(math.isfinite(t.value) and "checkpoint_error" in t.user_attrs and "checkpoint" not in t.user_attrs for t in finished)


def test_a_reader_refuses_a_model_another_study_of_the_same_name_wrote(monkeypatch, capsys, tiny_config, tmp_path):
    """Two storages, one study name: each study has its own id, so its own checkpoint folder; a model whose recorded
    id is the other study's (as every same-named study's was when folders were keyed by name) is refused, both named."""
    configs = [tiny_config.model_copy(update={"storage": f"sqlite:///{tmp_path / f'{k}.db'}"}) for k in "ab"]
    a, b = (open_study(config, open_storage(config.storage), check_corpus(config)).study for config in configs)
    folders = [trial_checkpoint_dir(config, study_uid(study), 0) for config, study in zip(configs, (a, b), strict=True)]
    assert study_uid(a) != study_uid(b) and folders[0] != folders[1]
    torch.manual_seed(0)
    save_checkpoint(PrismLM(tiny_config.model_config_, tiny_config.baseline), folders[1], study="tiny", study_uid=study_uid(b))
    for study in (a, b):  # both baselines name b's model: a's was overwritten by it under the old layout
        trial = study.ask()
        trial.set_user_attr("checkpoint", folders[1])
        study.tell(trial, 3.0)
    out = tmp_path / "profile.json"
    assert cli(monkeypatch, "audit", "tiny:baseline", "-o", out, "--storage", configs[1].storage) == 0
    capsys.readouterr()
    assert cli(monkeypatch, "audit", "tiny:baseline", "-o", out, "--storage", configs[0].storage) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and study_uid(a) in err and study_uid(b) in err and folders[1] in err, err
    assert cli(monkeypatch, "analyze", "tiny:baseline", "--storage", configs[0].storage) == 2
    assert study_uid(b) in capsys.readouterr().err


def test_a_study_made_before_study_ids_keeps_its_folder_and_reads_its_models(monkeypatch, tiny_config, tmp_path):
    """Committed results' studies have no id: their models stay at CHECKPOINT_DIR/NAME, where their stored paths
    point, and a checkpoint recording no id still loads for them."""
    study = optuna.create_study(study_name="tiny", storage=tiny_config.storage)  # created as such studies were
    store_config(study, tiny_config)
    assert study_uid(study) is None
    folder = trial_checkpoint_dir(tiny_config, None, 0)
    assert folder == str(Path(tiny_config.checkpoint_dir) / "tiny" / "trial-00000")
    torch.manual_seed(0)
    save_checkpoint(PrismLM(tiny_config.model_config_, tiny_config.baseline), folder, study="tiny")
    attrs = {"role": "baseline", "seed": tiny_config.seed, "schedule": str(tiny_config.baseline), "checkpoint": folder}
    study.add_trial(optuna.trial.create_trial(value=3.0, user_attrs=attrs))
    assert cli(monkeypatch, "audit", "tiny:baseline", "-o", tmp_path / "p.json", "--storage", tiny_config.storage) == 0


@pytest.mark.e2e
def test_same_named_studies_in_two_storages_never_share_a_model(monkeypatch, ray_local, tiny_config, tmp_path):
    """The case that lost a model: the second study's baseline overwrote the first's in CHECKPOINT_DIR/NAME/trial-00000,
    and `audit NAME:baseline` on the first storage read the other study's model. Real Ray, real workers, one folder."""
    search = tiny_config.search.model_copy(update={"baseline_seeds": 1})
    paths = []
    for k in "ab":
        config = tiny_config.model_copy(update={"storage": f"sqlite:///{tmp_path / f'{k}.db'}", "n_trials": 1, "search": search})
        ctx = open_study(config, open_storage(config.storage), check_corpus(config))
        Driver(ctx, stopping=make_stopping(ctx)).run(config.n_trials, n_workers=1)
        path = ctx.study.trials[0].user_attrs["checkpoint"]
        assert load_checkpoint(path)[1]["study_uid"] == study_uid(ctx.study)
        paths.append(path)
    assert paths[0] != paths[1] and all(Path(p).is_dir() for p in paths)
    storage_a = f"sqlite:///{tmp_path / 'a.db'}"
    assert cli(monkeypatch, "audit", "tiny:baseline", "-o", tmp_path / "p.json", "--storage", storage_a) == 0


@pytest.mark.e2e
def test_a_copied_database_resumed_writes_its_own_checkpoints(monkeypatch, ray_local, tiny_config, tmp_path):
    """The case that lost a model: a database copied with `sqlite3 .backup` kept the study's id, so both copies
    wrote CHECKPOINT_DIR/NAME-ID/trial-N and one's clean-up deleted the other's models. Real Ray, real workers.
    The copy keeps every model ("all"): under "best" its new trial's model is removed whenever that trial loses to
    the baseline, which depends on the run. That the clean-up never touches the other copy's folder, whatever it
    keeps, is test_a_copied_study_claims_its_own_folder_and_never_cleans_the_originals."""
    search = tiny_config.search.model_copy(update={"baseline_seeds": 1})
    config = tiny_config.model_copy(update={"n_trials": 1, "search": search})
    ctx = open_study(config, open_storage(config.storage), check_corpus(config))
    Driver(ctx, stopping=make_stopping(ctx)).run(1, n_workers=1)
    original = ctx.study.trials[0].user_attrs["checkpoint"]
    source, target = sqlite3.connect(config.storage.removeprefix("sqlite:///")), sqlite3.connect(tmp_path / "copy.db")
    with contextlib.closing(source), contextlib.closing(target):
        source.backup(target)
    copy_config = config.model_copy(update={"storage": f"sqlite:///{tmp_path / 'copy.db'}", "n_trials": 2, "keep_checkpoints": "all"})
    copy = open_study(copy_config, open_storage(copy_config.storage), check_corpus(copy_config))
    Driver(copy, stopping=make_stopping(copy)).run(2, n_workers=1)
    written = copy.study.trials[-1].user_attrs["checkpoint"]
    assert study_uid(copy.study) not in (None, study_uid(ctx.study)) and study_uid(copy.study) in written
    assert load_checkpoint(written)[1]["study_uid"] == study_uid(copy.study) and Path(original).is_dir()
    assert cli(monkeypatch, "audit", "tiny:baseline", "-o", tmp_path / "p.json", "--storage", config.storage) == 0
