"""`prism-search train` and `analyze`: one model from a schedule string, its checkpoint, the per-layer table."""

import inspect
import json
import subprocess
import sys

import pytest
import torch
from typer.testing import CliRunner

from prism import load_checkpoint
from search.analysis.summary import is_paired_baseline
from search.cli import app
from search.errors import ConfigError
from search.runner.driver import Driver
from search.runner.preflight import check_corpus
from search.storage import open_storage
from search.storage.records import FINISHED
from search.study.create import open_study
from search.study.pruning import make_stopping
from search.study.single import TrainOverrides, resolve, train_single

from .conftest import ROOT

TINY = str(ROOT / "studies" / "tiny.toml")


def test_train_saves_reloads_and_analyzes(tmp_path):
    runner = CliRunner()
    out = runner.invoke(
        app, ["train", "1x1,2x1,4x1", "--config", TINY, "--steps", "20", "--save", str(tmp_path / "ckpt"), "--analyze", "--json"]
    )
    assert out.exit_code == 0, out.output
    record = json.loads(out.output[: out.output.index("\n}") + 2])
    assert record["schedule"] == "1x1,2x1,4x1" and record["steps"] == 20 and record["final_val_loss"] < 5.6
    table, legend = out.output[out.output.index("\n}") + 3 :].split("\n\n")
    table = table.splitlines()
    assert table[0].split()[:3] == ["layer", "depth", "heads"]
    assert [line.split()[0] for line in legend.splitlines()] == table[0].split()  # every column explained
    assert [line.split()[2] for line in table[1:]] == ["1", "2", "4"]  # one row per layer with its head count
    model, meta = load_checkpoint(tmp_path / "ckpt")
    assert meta["result"]["final_val_loss"] == record["final_val_loss"] and str(model.schedule) == "1x1,2x1,4x1"
    again = runner.invoke(app, ["analyze", str(tmp_path / "ckpt")])
    assert again.exit_code == 0, again.output
    assert again.output.split("\n\n")[0].splitlines()[-3:] == table[-3:]  # the same model on the same text: the same metrics
    assert again.output.split("\n\n")[1] == legend


def test_train_save_on_a_full_disk_keeps_the_printed_result_and_exits_with_one_line(full_disk, tmp_path):
    """The model could not be saved, so the run did not do what was asked; its result is still shown."""
    target = full_disk / "model"
    proc = subprocess.run(
        [sys.executable, "-m", "search.cli", "train", "uniform", "--config", TINY, "--steps", "10", "--save", str(target), "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(f"error: model not saved to {target}: No space left on device"), proc.stderr
    assert json.loads(proc.stdout)["steps"] == 10  # the trained result, printed before the error
    assert not target.exists()  # no half-written checkpoint


@pytest.mark.e2e
def test_train_bad_input_is_one_line_and_exit_2(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "search.cli", "train", "3x3", "--config", TINY, "--save", "ckpt"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "schedule '3x3': layer 0: 3 heads do not divide d_model=64" in proc.stderr
    assert not list(tmp_path.iterdir())  # nothing written
    out = CliRunner().invoke(app, ["train", "uniform", "--config", TINY, "--corpus", str(tmp_path / "none.txt")])
    assert isinstance(out.exception, ConfigError) and "data.corpus: unknown corpus" in str(out.exception)


@pytest.mark.e2e
def test_steps_alone_keep_the_warmup_share_and_a_warmup_past_the_steps_is_one_line_exit_2(tmp_path):
    """`--steps 50` on the quickstart (60 warmup steps of 600) is not refused: the warmup keeps its 10%."""
    quickstart = str(ROOT / "studies" / "quickstart.toml")
    config, _ = resolve(quickstart, "1x2,2x1,4x1", TrainOverrides(steps=50))
    assert (config.train.steps, config.train.warmup_steps) == (50, 5)
    config, _ = resolve(quickstart, "uniform", TrainOverrides(steps=50, warmup_steps=0))
    assert (config.train.steps, config.train.warmup_steps) == (50, 0)
    for args, message in [
        (["1x2,2x1,4x1", "--config", quickstart, "--steps", "50", "--warmup-steps", "50"], "--warmup-steps 50 must be below the 50"),
        (["1x2,2x2,4x2"], "the built-in default model has 6 layers and head counts [1, 2]; fix: write a schedule of those"),
        (["1x2,2x2,4x2", "--config", quickstart], "quickstart.toml's model has 4 layers and head counts [1, 2, 4]"),
    ]:
        proc = subprocess.run([sys.executable, "-m", "search.cli", "train", *args], capture_output=True, text=True, cwd=tmp_path)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and message in proc.stderr, proc.stderr
    assert not list(tmp_path.iterdir())  # refused before anything was written


def test_a_train_run_on_another_corpus_embeds_that_corpus_vocab(tmp_path):
    """The model's vocab follows the data where the config leaves it out, also when `--corpus` replaces the data."""
    task = "pointer:digits=2,base=4,symbols=16"
    assert resolve(None, "uniform", TrainOverrides(corpus=task))[0].model.vocab_size == 20
    assert resolve(TINY, "uniform", TrainOverrides(corpus=task))[0].model.vocab_size == 20
    own = tmp_path / "own.toml"
    own.write_text('name = "own"\n[model]\nvocab_size = 64\n')
    assert resolve(str(own), "uniform", TrainOverrides(corpus=task))[0].model.vocab_size == 64  # the file's stands


def test_every_train_option_says_what_it_does():
    train = next(c for c in app.registered_commands if c.callback.__name__ == "train")
    options = [p.default for p in inspect.signature(train.callback).parameters.values()]
    assert len(options) >= 12 and all(o.help for o in options), [o.param_decls for o in options if not o.help]


@pytest.mark.e2e
def test_train_with_a_study_config_reproduces_the_studys_run_bit_for_bit(ray_local, tiny_config):
    """`train` runs on the study's cpus_per_trial threads, as its workers do: the baseline at the study seed is the
    same run, to the last bit (another thread count reorders float sums, which training amplifies)."""
    config = tiny_config  # cpus_per_trial = 1
    fingerprint = check_corpus(config)
    ctx = open_study(config, open_storage(config.storage), fingerprint)
    study = ctx.study
    Driver(ctx, stopping=make_stopping(ctx)).run(1, n_workers=1)
    (baseline,) = [t for t in study.get_trials(states=FINISHED) if is_paired_baseline(t.user_attrs, config)]
    torch.set_num_threads(2)  # torch's default on a 2-core machine
    run = train_single(config, config.baseline)
    assert torch.get_num_threads() == config.resources.cpus_per_trial == 1  # what the run used: the config's count
    assert run.result.final_val_loss == baseline.value
