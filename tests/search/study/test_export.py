"""What `export` and every `--json` write is safe to open: spreadsheet formulas in stored text are neutralised, and
every JSON the product prints parses under a parser that refuses the non-finite constants no JSON reader accepts."""

from __future__ import annotations

import csv
import io
import json
import math

import pytest
from optuna.trial import TrialState
from typer.testing import CliRunner

from search.cli import app
from search.storage.records import stored_config
from search.study.export import render
from tests.search.analysis.test_summary import UNIFORM, add, make_study
from tests.search.conftest import ROOT

runner = CliRunner()
FORMULAS = ['=HYPERLINK("http://x","y")', "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(1)", "\t=1", "\r=1"]


def strict_json(text: str):
    """json.loads, refusing NaN, Infinity and -Infinity (Python's json writes and reads them; nothing else does)."""

    def refuse(constant: str):
        raise ValueError(f"non-finite constant {constant} in JSON output")

    return json.loads(text, parse_constant=refuse)


def test_a_csv_cell_that_a_spreadsheet_would_run_as_a_formula_starts_with_a_quote(tiny_config):
    study = make_study(tiny_config, "cells")
    add(study, UNIFORM, 0, -0.01, role="baseline")  # a negative number stays a number
    for k, text in enumerate(FORMULAS):
        add(study, "4x3", k + 1, 2.0 + k, role=text, reference=text, tokens_per_s=-5.5)
    rows = list(csv.DictReader(io.StringIO(render(study, stored_config(study), "csv"), newline="")))
    assert rows[0]["val_loss"] == "-0.01" and float(rows[1]["tokens_per_s"]) == -5.5
    assert [r["role"] for r in rows[1:]] == [f"'{text}" for text in FORMULAS]
    assert [r["reference"] for r in rows[1:]] == [f"'{text}" for text in FORMULAS]
    assert rows[0]["role"] == "baseline" and rows[1]["schedule"] == "4x3"  # plain text is written as it is
    assert [r["role"] for r in json.loads(render(study, stored_config(study), "json"))[1:]] == FORMULAS  # JSON: as stored


@pytest.fixture
def infinite_study(tiny_config):
    """A study whose stored numbers include inf and nan where Optuna lets them be: a value, an attribute."""
    study = make_study(tiny_config, "inf")
    add(study, UNIFORM, 0, 2.05, role="baseline", tokens_per_s=math.inf)
    add(study, "4x3", 0, math.inf)
    add(study, "2x3", 0, 2.03, tokens_per_s=math.nan, throughput_ratio=-math.inf)
    add(study, "1x3", 1, None, role="baseline", state=TrialState.FAIL)
    return tiny_config.storage


def test_every_json_output_is_strict_json(infinite_study, tmp_path):
    url = ["--storage", infinite_study]
    outputs = {
        "status --json": runner.invoke(app, ["status", *url, "--json"]),
        "status NAME --json": runner.invoke(app, ["status", "inf", *url, "--json"]),
        "export --format json": runner.invoke(app, ["export", "inf", *url, "--format", "json"]),
        "train --json": runner.invoke(app, ["train", "uniform", "--config", str(ROOT / "studies" / "tiny.toml"), "--steps", "4", "--json"]),
    }
    parsed = {}
    for command, result in outputs.items():
        assert result.exit_code == 0, (command, result.output)
        parsed[command] = strict_json(result.stdout)
    exported = {row["number"]: row for row in parsed["export --format json"]}
    assert exported[0]["tokens_per_s"] is None and exported[2]["throughput_ratio"] is None  # non-finite: null, "no value"
    assert isinstance(parsed["status --json"], list) and [s["name"] for s in parsed["status --json"]] == ["inf"]
    assert parsed["status NAME --json"] == parsed["status --json"][0]  # a named study: its one object
    assert parsed["train --json"]["steps"] == 4


def test_one_row_type_for_study_trials_the_export_and_the_dashboard(tiny_config):
    """`Study.trials()`, every export format and the dashboard read a trial through the one `TrialRow`: the export's
    columns are the rows' own, and the dashboard shows the same rows."""
    from search import Study, TrialRow
    from search.dashboard import study_view

    study = make_study(tiny_config, "rows")
    add(study, UNIFORM, 0, 2.5, role="baseline")
    add(study, "4x3", 0, 2.4)
    rows = Study.load("rows", storage=tiny_config.storage).trials()
    assert [type(r) for r in rows] == [TrialRow, TrialRow] and [r.schedule for r in rows] == [UNIFORM, "4x3"]
    assert [r.values for r in rows] == [{"val_loss": 2.5}, {"val_loss": 2.4}] and all(r.feasible for r in rows)
    config = stored_config(study)
    assert [r.columns(config.model.n_layer) for r in rows] == json.loads(render(study, config, "json"))
    shown = [r for r in study_view(study).rows if r.state == "COMPLETE"]
    assert shown == rows
