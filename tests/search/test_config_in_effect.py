"""Settings of a study file that could never take effect are refused before anything trains; a stored study made
with one still opens (it was checked by the version that made it), and `train --steps` may shorten its one run."""

from __future__ import annotations

import re
import tomllib

import pytest

from search.config import check_in_effect, load_config, parse_config
from tests.search.test_adversarial_io import cli


@pytest.mark.parametrize(
    "edits, message",
    [
        (
            (("n_startup_trials = 2", "n_startup_trials = 2\nmin_resource_evals = 4"),),
            r"search.min_resource_evals=4: a run has only 3 evaluations \(train.steps 60 / train.eval_every 20\), so the pruner "
            r"would never act \(fix: at most 3",
        ),
        (
            (("n_startup_trials = 2", "n_startup_trials = 2\nmin_throughput_ratio = 2.0"),),
            r"search.min_throughput_ratio=2 would make uniform itself \(ratio 1\) infeasible",
        ),
        (
            (
                ("n_trials = 5", "n_trials = 6"),
                ("baseline_seeds = 2", 'baseline_seeds = 1\n[experiment]\nschedule = "1x1,2x1,4x1"\nlooks = [3]'),
            ),
            r"search.pruner='successive-halving': an experiment's pairs train to the end.* \(fix: pruner = \"none\"\)",
        ),
    ],
    ids=["rung-past-the-last-evaluation", "ratio-above-uniform", "pruner-in-an-experiment"],
)
def test_a_setting_that_can_never_take_effect_is_refused_and_a_stored_one_opens(study_toml, edits, message, tmp_path, monkeypatch, capsys):
    path = study_toml(*edits, name="T.toml")
    code, out, err = cli(monkeypatch, capsys, tmp_path, "run", "T.toml", "--storage", f"sqlite:///{tmp_path / 's.db'}")
    assert code == 2 and out == "" and err.count("\n") == 1 and re.match(f"error: T.toml: {message}", err), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["T.toml"]  # refused before anything was stored
    parse_config(tomllib.loads(path.read_text()), "stored", stored=True)  # what reading a stored study parses
    load_config(path)  # `train --config` and `schedules` read it: they prune nothing


def test_the_same_settings_where_they_can_act_pass(study_toml):
    for edit in (
        ("n_startup_trials = 2", "n_startup_trials = 2\nmin_resource_evals = 3\nmin_throughput_ratio = 1.0"),
        ('pruner = "successive-halving"', 'pruner = "none"\nmin_resource_evals = 9'),  # no pruner: harmless
    ):
        check_in_effect(load_config(study_toml(edit)), "study.toml")
