"""The CLI commands of the search engine: schedules, best, export, confirm, and their bad input."""

import csv
import io
import json
import math
import subprocess
import sys

import optuna
import pytest
from typer.testing import CliRunner

from search.cli import app
from search.runner.driver import Driver
from search.runner.preflight import check_corpus
from search.storage import open_storage
from search.study.create import open_study
from search.study.pruning import make_stopping

runner = CliRunner()


def test_schedules_prints_the_space_size_and_lists_every_schedule(study_toml):
    plain = runner.invoke(app, ["schedules", str(study_toml())])
    assert plain.exit_code == 0 and plain.stdout.startswith(f"ramp: {math.comb(3 + 3 - 1, 2)} schedules (3 layers")
    listed = runner.invoke(app, ["schedules", str(study_toml(("[train]", '[space]\nfamily = "free"\n\n[train]'))), "--list"])
    lines = listed.stdout.splitlines()
    assert lines[0].startswith("free: 27 schedules") and len(lines[1:]) == len(set(lines[1:])) == 27


@pytest.mark.e2e
def test_best_export_and_confirm_on_a_finished_study(ray_local, tiny_config):
    config = tiny_config.model_copy(update={"n_trials": 3, "train": tiny_config.train.model_copy(update={"steps": 20})})
    fingerprint = check_corpus(config)
    ctx = open_study(config, open_storage(config.storage), fingerprint)
    study = ctx.study
    Driver(ctx, stopping=make_stopping(ctx)).run(config.n_trials, n_workers=2)
    url = ["--storage", config.storage]

    best = runner.invoke(app, ["best", "tiny", *url])
    assert best.exit_code == 0, best.output
    verdict, line = best.stdout.strip().splitlines()
    assert verdict.startswith("verdict\tundecided at margin 0.01")  # one seed per searched schedule decides nothing
    schedule, loss, gap = line.split("\t")
    # every search trial ran at seed 0, paired with uniform there: the best paired mean is the lowest loss at seed 0,
    # and its val loss is its mean over the seeds it ran (uniform ran at both baseline seeds)
    ranked = min((t for t in study.trials if t.state.name == "COMPLETE" and t.user_attrs["seed"] == 0), key=lambda t: t.value)
    own = {t.user_attrs["seed"]: t.value for t in study.trials if t.state.name == "COMPLETE" and t.user_attrs["schedule"] == schedule}
    assert schedule == ranked.user_attrs["schedule"] and loss == f"val_loss {sum(own.values()) / len(own):.4f}"
    assert "noise not measured yet; run `prism-search confirm tiny" in gap and "selected as best of" in gap  # one seed

    rows = list(csv.DictReader(io.StringIO(runner.invoke(app, ["export", "tiny", *url, "--format", "csv"]).stdout)))
    as_json = json.loads(runner.invoke(app, ["export", "tiny", *url, "--format", "json"]).stdout)
    assert len(rows) == len(as_json) == 3
    for row in rows:  # one column per layer's head count, agreeing with the schedule
        assert [int(row[f"layer_{i:02d}"]) for i in range(3)] == [int(h) for h in _heads(row["schedule"])]

    confirmed = runner.invoke(app, ["confirm", "tiny", "--top", "1", "--seeds", "2", *url])
    assert confirmed.exit_code == 0, confirmed.output
    status = json.loads(runner.invoke(app, ["status", "tiny", *url, "--json"]).stdout)
    rows = status["confirmation"]
    assert len(rows) == 2 and rows[0]["schedule"] == "1x3"  # the baseline, then the best other schedule
    assert all(r["seeds"] == 2 and r["val_loss_std"] is not None for r in rows)
    assert rows[0]["gap"] is None and rows[1]["gap"]["n"] == 2  # uniform, then the confirmed best: 2 fresh pairs
    runs = [t for t in optuna.load_study(study_name="tiny", storage=config.storage).trials if t.user_attrs["role"] == "confirm"]
    assert sorted({t.user_attrs["seed"] for t in runs}) == [1000, 1001]  # fresh seeds, never used by the search

    # nothing new to train: read from the study, in a process of its own, which never starts Ray
    code = (
        "import ray; from search import Study\n"
        f"rows = Study.load('tiny', storage={config.storage!r}).confirm(top=1, seeds=2)\n"
        "print([r.seeds for r in rows], ray.is_initialized())"
    )
    again = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert again.stdout.strip() == "[2, 2] False", again.stdout + again.stderr
    after = optuna.load_study(study_name="tiny", storage=config.storage).trials
    assert [t.number for t in after if t.user_attrs["role"] == "confirm"] == [t.number for t in runs]  # nothing queued again

    more = runner.invoke(app, ["confirm", "tiny", "--top", "1", "--seeds", "3", *url])  # one more seed: 2 new runs only
    assert more.exit_code == 0, more.output
    added = [t for t in optuna.load_study(study_name="tiny", storage=config.storage).trials if t.user_attrs["role"] == "confirm"][
        len(runs) :
    ]
    assert sorted((t.user_attrs["schedule"], t.user_attrs["seed"]) for t in added) == sorted((r["schedule"], 1002) for r in rows)
    status = json.loads(runner.invoke(app, ["status", "tiny", *url, "--json"]).stdout)
    assert [r["seeds"] for r in status["confirmation"]] == [3, 3]
    assert (status["trained"], status["confirmation_runs"]) == (3, 6)  # 2 schedules x 3 seeds, apart from n_trials

    resumed = runner.invoke(app, ["resume", "tiny", "--n-trials", "4", *url])  # the 6 confirmation runs eat none of it
    assert resumed.exit_code == 0, resumed.output
    status = json.loads(runner.invoke(app, ["status", "tiny", *url, "--json"]).stdout)
    assert (status["trained"], status["confirmation_runs"]) == (4, 6)


def _heads(text):
    from prism import Schedule

    return Schedule.parse(text).heads


def _sha(path):
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


# every search setting's error is checked at the config level (test_config.py); these go through the real CLI
@pytest.mark.e2e
@pytest.mark.parametrize(
    "edits, fragment",
    [
        ([("[train]", '[space]\nfamily = "zigzag"\n\n[train]')], "space.family: 'zigzag' is not valid"),
        (
            [("n_layer = 3", "n_layer = 9"), ('[search]\nsampler = "tpe"', '[space]\nfamily = "free"\n\n[search]\nsampler = "grid"')],
            "cannot enumerate the 19,683 schedules of the 'free' space",
        ),
        (
            [('pruner = "successive-halving"', 'pruner = "median"\nobjectives = ["val_loss", "throughput"]')],
            "pruner='median' cannot stop multi-objective trials",
        ),
    ],
)
def test_bad_search_input_is_one_line_exit_2_and_writes_nothing(tmp_path, study_toml, edits, fragment):
    db = tmp_path / "keep.db"
    optuna.create_study(study_name="existing", storage=f"sqlite:///{db}").optimize(lambda t: 1.0, n_trials=1)
    before = _sha(db)
    result = subprocess.run(
        [sys.executable, "-m", "search.cli", "run", str(study_toml(*edits)), "--storage", f"sqlite:///{db}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert result.stdout == "" and result.stderr.count("\n") == 1 and fragment in result.stderr
    assert _sha(db) == before


@pytest.mark.e2e
def test_a_stored_config_this_version_cannot_read_is_one_line_exit_2(tiny_config):
    """A study made by another version (an extra config field): status names the field and the fix, no traceback."""
    ctx = open_study(tiny_config, open_storage(tiny_config.storage), check_corpus(tiny_config))
    study = ctx.study
    raw = json.loads(study.user_attrs["prism.config"])
    study.set_user_attr("prism.config", json.dumps({**raw, "mirror": "elsewhere"}))
    result = subprocess.run(
        [sys.executable, "-m", "search.cli", "status", "tiny", "--storage", tiny_config.storage],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and result.stdout == "" and result.stderr.count("\n") == 1
    assert result.stderr == (
        "error: stored config of study 'tiny': mirror: unknown field; open the study with the prism-search version that created it\n"
    )


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def test_best_json_carries_what_best_prints(tmp_path):
    """`best --json`: the same best schedule, value, verdict and gap as the text, as valid JSON (no NaN/Infinity)."""
    from search.config import parse_config
    from tests.search.synthetic import synthetic_study

    url = f"sqlite:///{tmp_path / 's.db'}"
    config = parse_config({"name": "s", "model": {"n_layer": 3, "d_model": 64, "dh_min": 16, "dh_max": 64}, "storage": url})
    synthetic_study(config, url, 12, failed=0)
    text = runner.invoke(app, ["best", "s", "--storage", url])
    as_json = runner.invoke(app, ["best", "s", "--storage", url, "--json"])
    assert text.exit_code == 0 and as_json.exit_code == 0, as_json.output
    best = json.loads(as_json.output, parse_constant=_refuse_constant)
    verdict_line, best_line = text.output.splitlines()[:2]
    assert verdict_line == f"verdict\t{best['verdict']['text']}"
    assert best_line == f"{best['best_schedule']}\tval_loss {best['best_value']:.4f}\tgap to uniform {best['gap_text']}"
    assert best["study"] == "s" and best["pareto"] == [] and best["best_number"] is not None
