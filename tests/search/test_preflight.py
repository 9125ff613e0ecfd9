"""Failures that used to surface only inside a worker, after the study was written and Ray started: each is now one
line `error: ... (fix: ...)` with exit code 2 from the real CLI, and the storage and working folder stay as they were."""

import hashlib
import json
import subprocess
import sys

import optuna
import pytest
import torch

from search.config import StudyConfig
from search.errors import ConfigError
from search.runner.preflight import SIZE_FIELDS, check_corpus, preflight, training_bytes
from search.storage import open_storage
from search.study.create import open_study

ABSURD = {  # each alone needs far more than any machine holds (the smallest: ~20 TiB)
    "model.n_layer": 10**7,
    "model.d_model": 2**20,
    "model.mlp_ratio": 10**8,
    "model.block_size": 10**9,
    "model.vocab_size": 10**9,
    "train.batch_size": 10**12,
}


def _sized(config: StudyConfig, field: str, value: int) -> StudyConfig:
    section, key = field.split(".")
    return config.model_copy(update={section: getattr(config, section).model_copy(update={key: value})})


def test_the_absurd_values_cover_every_size_the_estimate_reads():
    assert set(ABSURD) == set(SIZE_FIELDS)


@pytest.mark.parametrize("field", SIZE_FIELDS)
def test_a_size_the_machine_cannot_hold_is_refused_naming_it(tiny_config, field):
    """model_copy skips validation, so the corpus (32-token windows) is not what refuses: only the memory check can."""
    with pytest.raises(ConfigError) as info:
        preflight(_sized(tiny_config, field, ABSURD[field]))
    message = str(info.value)
    assert message.startswith(f"{field}={ABSURD[field]}: training needs about ") and " GiB available (fix: lower " in message
    assert "for 2 trials at once (resources.workers)" in message  # tiny.toml runs two workers on this machine


def test_a_config_that_fits_passes_and_the_estimate_grows_with_every_size(tiny_config):
    preflight(tiny_config)  # tiny.toml fits anywhere: the check must not refuse real configs
    sizes = {name: getattr(getattr(tiny_config, name.split(".")[0]), name.split(".")[1]) for name in SIZE_FIELDS}
    base = training_bytes(sizes)
    assert 1e6 < base < 1e8  # a few MiB for a 3-layer, 64-wide model on 8x32-token batches
    for name in SIZE_FIELDS:
        assert training_bytes(sizes | {name: sizes[name] * 2}) > base, name


def test_a_cluster_address_skips_this_machines_memory(tiny_config):
    """Trials on a cluster run on other machines: this one's memory says nothing about them."""
    preflight(_sized(tiny_config, "model.n_layer", ABSURD["model.n_layer"]), address="10.0.0.1:6379")


def _sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "search.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=300)


@pytest.fixture
def workdir(tmp_path, study_toml):
    """A folder holding a stored study (keep.db), a 3-byte and a 100-byte corpus, a file, a folder and bad checkpoints."""
    url = f"sqlite:///{tmp_path / 'keep.db'}"
    optuna.create_study(study_name="existing", storage=url).optimize(lambda t: 1.0, n_trials=1)
    (tmp_path / "c3.txt").write_text("abc")
    (tmp_path / "c100.txt").write_text("x" * 100)
    (tmp_path / "a_file").write_text("not a folder")
    (tmp_path / "a_folder").mkdir()
    for name, config, weights in (
        ("bad_json", "{not json", b"junk"),
        ("bad_weights", json.dumps({"format": "prism-checkpoint/1"}), b"junk"),
    ):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(config)
        (tmp_path / name / "model.safetensors").write_bytes(weights)
    study_toml()  # study.toml: tiny.toml as it is
    study_toml(("n_trials = 5", "n_trials = 5\n\n[data]\ncorpus = 'c3.txt'"), name="c3.toml")
    study_toml(("n_trials = 5", "n_trials = 5\n\n[data]\ncorpus = 'c100.txt'"), name="c100.toml")
    study_toml(("seed = 0", "seed = 0\ncheckpoint_dir = 'a_file/sub'\nkeep_checkpoints = 'best'"), name="ckfile.toml")
    study_toml(("seed = 0", "seed = 0\ncheckpoint_dir = 'a_file'"), name="ckauto.toml")  # kept by --prior auto only
    study_toml(("d_model = 64", "d_model = 65536"), name="deep.toml")  # the widest d_model the bounds allow
    study_toml(
        ("steps = 60", "steps = 4\nlr = 10.0"),
        ("warmup_steps = 6", "warmup_steps = 0"),
        ("eval_every = 20", "eval_every = 2"),
        name="lr10.toml",
    )
    return tmp_path, url


CASES = [
    (["run", "c3.toml"], "data.corpus: training split of"),
    (["run", "c100.toml"], "data.corpus: validation split of"),
    (["run", "ckfile.toml"], "is a file, not a folder (fix: point checkpoint_dir at a folder)"),
    (["run", "ckauto.toml", "--prior", "auto"], "is a file, not a folder (fix: point checkpoint_dir at a folder)"),
    (["run", "deep.toml"], "model.d_model=65536: training needs about"),
    (["run", "study.toml", "--storage", "postgresql+psycopg://u@host:abc/db"], "is not a valid SQLAlchemy URL"),
    (["resume", "existing", "--storage", "postgresql+psycopg://u@host:abc/db"], "is not a valid SQLAlchemy URL"),
    (["confirm", "existing", "--storage", "postgresql+psycopg://u@host:abc/db"], "is not a valid SQLAlchemy URL"),
    (["train", "uniform", "--config", "study.toml", "--device", "gpu9"], "device 'gpu9' is not one prism-search trains on (fix: "),
    (["train", "uniform", "--config", "c3.toml"], "data.corpus: training split of"),
    (["train", "uniform", "--config", "study.toml", "--save", "a_file/ckpt"], "--save 'a_file/ckpt': "),
    (["train", "uniform", "--config", "lr10.toml"], "training diverged: validation loss"),
    (["analyze", "missing"], "'missing' is not a checkpoint"),
    (["analyze", "a_file"], "'a_file' is not a checkpoint"),
    (["analyze", "bad_json"], "config.json: not valid JSON"),
    (["analyze", "bad_weights"], "'bad_weights' holds a damaged checkpoint"),
    (["report", "existing", "-o", "a_folder"], "-o 'a_folder' is a folder (fix: "),
]
if not torch.cuda.is_available():
    CASES.append((["train", "uniform", "--config", "study.toml", "--device", "cuda"], "--device: CUDA is not available on this machine"))


@pytest.mark.e2e
@pytest.mark.parametrize("args, fragment", CASES, ids=[" ".join(a[:2]) + f" {i}" for i, (a, _) in enumerate(CASES)])
def test_what_fails_in_a_worker_is_refused_up_front(workdir, args, fragment):
    folder, url = workdir
    if args[0] in ("run", "report") and "--storage" not in args:
        args = [*args, "--storage", url]
    before = {p.name: p.stat().st_mtime_ns for p in folder.rglob("*")}
    db = _sha(folder / "keep.db")
    result = _cli(*args, cwd=folder)
    assert result.returncode == 2, result.stderr
    assert result.stdout == "" and result.stderr.count("\n") == 1 and result.stderr.startswith("error: "), result.stderr
    assert fragment in result.stderr, result.stderr
    assert _sha(folder / "keep.db") == db
    assert {p.name: p.stat().st_mtime_ns for p in folder.rglob("*")} == before  # no default database, no checkpoint folder


@pytest.mark.e2e
def test_a_stored_study_whose_checkpoint_dir_became_a_file_is_refused_by_resume_and_confirm(tmp_path, tiny_config):
    """The stored config is checked against this machine again: the file appeared after the study was made."""
    config = tiny_config.model_copy(update={"checkpoint_dir": str(tmp_path / "ckpts"), "keep_checkpoints": "best"})
    storage = open_storage(config.storage)
    study = open_study(config, storage, check_corpus(config)).study
    storage.engine.dispose()  # the last connection folds the write-ahead log into the file: its bytes are final
    (tmp_path / "ckpts").write_text("in the way")
    db = tmp_path / "study.db"
    trials, sha = len(study.trials), _sha(db)
    for command in ("resume", "confirm"):
        result = _cli(command, "tiny", "--storage", config.storage, cwd=tmp_path)
        assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
        assert f"checkpoint_dir {str(tmp_path / 'ckpts')!r}: " in result.stderr and "(fix: " in result.stderr
        assert _sha(db) == sha and len(optuna.load_study(study_name="tiny", storage=config.storage).trials) == trials


def test_preflight_states_what_the_corpus_holds(tiny_config, tmp_path):
    """What `run`, `resume` and `confirm` say before they train: the split sizes and how the tokens are read (a token
    file is mapped, never loaded whole); a task generates its sequences, so it has no size to state."""
    import numpy as np

    from prism.data import load_corpus
    from search.text import corpus_text

    facts = preflight(tiny_config)
    assert facts.fingerprint == check_corpus(tiny_config) and not facts.mapped and facts.vocab_size == 256
    total = len(load_corpus("shakespeare").tokens)  # its bytes, cut 0.9 / 0.1
    assert (facts.train_tokens, facts.val_tokens) == (int(total * 0.9), total - int(total * 0.9))
    assert corpus_text(facts) == "corpus shakespeare: 5.15M training and 572k validation tokens, vocab 256 (in memory)"
    ids = np.memmap(tmp_path / "train.bin", dtype=np.uint16, mode="w+", shape=(20_000,))
    ids[:] = np.arange(20_000) % 200
    ids.flush()
    data = tiny_config.data.model_copy(update={"corpus": str(tmp_path / "train.bin"), "vocab_size": 256})
    mapped = preflight(tiny_config.model_copy(update={"data": data}))
    assert mapped.mapped and (mapped.train_tokens, mapped.val_tokens) == (18_000, 2_000)
    assert corpus_text(mapped).endswith("18k training and 2k validation tokens, vocab 256 (memory-mapped, read a batch at a time)")
    data = tiny_config.data.model_copy(update={"corpus": "mqar:pairs=4,key_len=2"})
    task = preflight(tiny_config.model_copy(update={"data": data, "model": tiny_config.model.model_copy(update={"block_size": 16})}))
    assert task.train_tokens is None and corpus_text(task).startswith("corpus mqar:pairs=4,key_len=2: a generated task, vocab")
