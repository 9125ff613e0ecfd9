"""`export --schedule`: one schedule in the formats other codebases load, chosen as `status` chooses it."""

import json
import subprocess
import sys

import pytest

from prism import Schedule
from search.analysis import summarize
from search.study.export import render_schedule
from tests.search.synthetic import synthetic_study


@pytest.fixture
def study(tiny_config):
    return synthetic_study(tiny_config, tiny_config.storage, 12)


def test_each_format_holds_the_best_schedules_heads_and_dims(study, tiny_config):
    best = Schedule.parse(summarize(study).best_schedule)
    d_model = tiny_config.model.d_model
    as_json = json.loads(render_schedule(study, tiny_config, "best", "json"))
    assert as_json["n_head"] == list(best.heads) and as_json["head_dim"] == list(best.head_dims(d_model))
    assert as_json["d_model"] == d_model and as_json["schedule"] == str(best)
    hf = json.loads(render_schedule(study, tiny_config, "best", "hf"))
    assert hf["num_query_heads"] == hf["num_kv_heads"] == list(best.heads) and hf["model_dim"] == d_model
    assert json.loads(render_schedule(study, tiny_config, "best", "nanogpt")) == {
        "n_layer": best.n_layer,
        "n_embd": d_model,
        "n_head": list(best.heads),
    }


def test_verdict_and_trial_choices(study, tiny_config):
    summary = summarize(study)
    verdict = json.loads(render_schedule(study, tiny_config, "verdict", "json"))
    expected = summary.verdict.schedule if summary.verdict.kind == "better" else summary.baseline_schedule
    assert verdict["schedule"] == expected and verdict["source"].startswith("verdict: ")
    trial = study.trials[3]
    assert json.loads(render_schedule(study, tiny_config, "3", "json"))["schedule"] == trial.user_attrs["schedule"]


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--schedule", "best", "--format", "csv"], "--format 'csv' is not a schedule format; use json, hf, nanogpt"),
        (["--schedule", "worst", "--format", "json"], "--schedule 'worst': use best, verdict or a trial number"),
        (["--schedule", "999", "--format", "json"], "has no trial 999 with a schedule"),
        (["--format", "hf"], "(hf and nanogpt with --schedule)"),
    ],
)
def test_bad_export_choices_are_one_line(study, tiny_config, args, fragment):
    done = subprocess.run(
        [sys.executable, "-m", "search.cli", "export", "tiny", "--storage", tiny_config.storage, *args], capture_output=True, text=True
    )
    assert done.returncode == 2 and fragment in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_exporting_a_pruned_or_failed_trial_s_schedule_warns_on_stderr(study, tiny_config):
    """A trial number picks any trial's schedule; one that was never trained to its end is no measured choice, so
    the export says so on stderr (stdout stays the file)."""
    from typer.testing import CliRunner

    from search.cli import app

    cut = next(t for t in study.trials if t.state.name in ("PRUNED", "FAIL") and "schedule" in t.user_attrs)
    done = next(t for t in study.trials if t.state.name == "COMPLETE")
    runner = CliRunner()
    url = ["--storage", tiny_config.storage, "--format", "json"]
    warned = runner.invoke(app, ["export", "tiny", "--schedule", str(cut.number), *url])
    assert warned.exit_code == 0 and json.loads(warned.stdout)["schedule"] == cut.user_attrs["schedule"]
    assert f"warning: trial {cut.number} ended {cut.state.name}: its schedule was not trained to the end" in warned.stderr
    quiet = runner.invoke(app, ["export", "tiny", "--schedule", str(done.number), *url])
    assert quiet.exit_code == 0 and quiet.stderr == ""
