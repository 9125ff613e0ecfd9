"""`prism-search plan`: the forecast on tiny.toml from a stated sd (its speed timed here) and from stored pilots, bad
input as one line and exit 2, and the cost of deciding in an undecided study's `status`."""

import json
import math
import statistics

import pytest

from search.analysis.blocked import many_to_one
from search.analysis.summary import study_runs, summarize
from search.config import load_config
from search.storage import open_storage
from tests.search.analysis.test_summary import UNIFORM, add, make_study
from tests.search.conftest import ROOT
from tests.search.synthetic import synthetic_study
from tests.search.test_cli_errors import run_cli

TINY = str(ROOT / "studies" / "tiny.toml")


@pytest.fixture(autouse=True)
def wide_console(monkeypatch):
    """Each table row on one line, so a test reads a row's text whole."""
    import search.cli

    monkeypatch.setattr(search.cli.console, "width", 400)


def plan_json(monkeypatch, capsys, tmp_path, *args):
    code, out, err = run_cli(monkeypatch, capsys, tmp_path, "plan", TINY, *args, "--json")
    assert code == 0, err
    return json.loads(out)


def test_a_stated_sd_forecasts_seeds_runs_and_the_time_measured_here(monkeypatch, capsys, tmp_path):
    f = plan_json(monkeypatch, capsys, tmp_path, "--sd", "0.008")
    assert (f["pairs"], f["search_runs"], f["confirm_runs"], f["total"]["runs"]) == (8, 5, 48, 53)
    speed = f["speed"]
    assert speed["source"] == "measured" and speed["tokens_per_s"] > 0 and (speed["schedule"], speed["threads"]) == (UNIFORM, 1)
    assert f["total"]["hours"] == pytest.approx(f["total"]["tokens"] / speed["tokens_per_s"] / 3600)
    code, out, _ = run_cli(monkeypatch, capsys, tmp_path, "plan", TINY, "--sd", "0.008", "--margin", "0.02", "--tokens-per-s", "256")
    text = " ".join(out.split())
    assert code == 0 and "4 paired seeds per schedule resolve 0.02" in text, text  # effect size 2.5: statsmodels' n is 3.5
    assert "`prism-search confirm tiny --top 5 --seeds 4`" in text and "29 runs x 15.4k tokens = 445k training tokens" in text
    assert "29 min of training one run at a time at 256 tokens/s (given --tokens-per-s)" in text  # 29 runs of 60 s each
    assert list(tmp_path.iterdir()) == []  # nothing stored


def test_a_study_confirmed_in_rounds_is_planned_with_its_rounds(monkeypatch, capsys, tmp_path, study_toml):
    toml = study_toml(('confirmation = "manual"', 'confirmation = "rounds"'), ("baseline_seeds = 2", "baseline_seeds = 1"))
    code, out, err = run_cli(monkeypatch, capsys, tmp_path, "plan", str(toml), "--sd", "0.008", "--tokens-per-s", "256")
    text = " ".join(out.split())
    assert code == 0 and "search at one seed, then two confirmation rounds" in text, text + err
    assert (
        "round 1, the best 3 and uniform on one fresh seed (4 runs); round 2, the best of them frozen and uniform on 4 new seeds (8 runs)"
        in text
    )
    assert "17 runs x 15.4k tokens" in text  # 5 search runs and 12 in the rounds
    assert "(6 df)" in text  # 17 runs less 6 schedules (the pick's round-2 runs one of them) and 6 seeds, plus one
    assert "it needs 8 paired seeds, `prism-search confirm tiny --top 1 --seeds 8` after the rounds" in text  # 4 do not resolve 0.01


def test_the_studys_own_pilot_gives_the_noise_and_the_speed(monkeypatch, capsys, tmp_path):
    """A stored tiny study with uniform at its 2 baseline seeds and every other schedule at one: no paired noise,
    so sqrt 2 x uniform's sd; the speed is the median of its stored runs (the same model and threads)."""
    url = f"sqlite:///{tmp_path / 'pilot.db'}"
    config = load_config(TINY)
    study = synthetic_study(config, open_storage(url), 8, failed=0)
    f = plan_json(monkeypatch, capsys, tmp_path, "--storage", url)
    uniform = [v for (s, _), v in study_runs(study.get_trials(), config).items() if s == UNIFORM]
    assert len(uniform) == 2
    assert f["noise"] == {"sd_pair": math.sqrt(2) * statistics.stdev(uniform), "source": "uniform", "study": "tiny", "df": 1, "method": ""}
    stored = [t.user_attrs["tokens_per_s"] for t in study.get_trials() if t.state.name == "COMPLETE"]
    assert f["speed"]["source"] == "stored" and f["speed"]["tokens_per_s"] == statistics.median(stored)
    assert f["speed"]["runs"] == len(stored)


def test_noise_from_another_study_is_its_blocked_models(monkeypatch, capsys, tmp_path, tiny_config):
    """A pilot with a longer context: its paired sd is read, its speed is not (other work), so it is timed here."""
    study = make_study(tiny_config.model_copy(update={"model": tiny_config.model.model_copy(update={"block_size": 64})}), name="longer")
    for seed, base, a, b in ((0, 2.05, 2.04, 2.07), (1, 2.08, 2.09, 2.10), (2, 2.02, 2.00, 2.05)):
        add(study, UNIFORM, seed, base, role="baseline", tokens_per_s=99.0)
        add(study, "4x3", seed, a, tokens_per_s=99.0)
        add(study, "2x3", seed, b, tokens_per_s=99.0)
    f = plan_json(monkeypatch, capsys, tmp_path, "--noise-from", "longer", "--storage", tiny_config.storage)
    runs = study_runs(study.get_trials(), tiny_config)
    assert f["noise"]["sd_pair"] == many_to_one(runs, UNIFORM).sd_pair
    assert f["noise"]["source"] == "paired" and f["noise"]["study"] == "longer" and f["noise"]["df"] == 4  # 9 runs - 5 parameters
    assert f["speed"]["source"] == "measured" and f["speed"]["tokens_per_s"] != 99.0


def test_a_gpu_config_without_a_gpu_or_a_stated_speed_has_no_hours(monkeypatch, capsys, tmp_path, study_toml):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the speed is timed on it")
    gpu = study_toml(("[resources]\nworkers = 2", "[resources]\nworkers = 1\ngpus_per_trial = 1"))
    code, out, err = run_cli(monkeypatch, capsys, tmp_path, "plan", str(gpu), "--sd", "0.008")
    text = " ".join(out.split())
    assert code == 0, err
    assert "53 runs x 15.4k tokens" in text and "no tokens/s: the config trains on a GPU, none is here" in text, text
    assert "pass --tokens-per-s" in text


@pytest.mark.parametrize(
    "args, fragment",
    [
        ([], "no noise to forecast from: study 'tiny' is not stored"),
        (["--noise-from", "nope"], "--noise-from 'nope': no such study"),
        (["--sd", "0.01", "--noise-from", "x"], "--sd and --noise-from both give the noise"),
        (["--sd", "0"], "--sd 0.0: must be above 0"),
        (["--sd", "0.01", "--margin", "0"], "--margin 0.0: must be above 0"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(monkeypatch, capsys, tmp_path, args, fragment):
    url = f"sqlite:///{tmp_path / 'none.db'}"
    code, out, err = run_cli(monkeypatch, capsys, tmp_path, "plan", TINY, "--storage", url, *args)
    assert code == 2 and out == "" and err.startswith("error: ") and err.count("\n") == 1, err
    assert fragment in err and "fix:" in err, err
    assert not (tmp_path / "none.db").exists()  # nothing created


def test_an_experiment_is_refused(monkeypatch, capsys, tmp_path):
    code, _, err = run_cli(monkeypatch, capsys, tmp_path, "plan", str(ROOT / "studies" / "prereg-long.toml"), "--sd", "0.01")
    assert code == 2 and "is a pre-registered experiment" in err and err.count("\n") == 1, err


def test_an_undecided_status_ends_with_what_deciding_costs(monkeypatch, capsys, tmp_path, tiny_config):
    study = synthetic_study(tiny_config, open_storage(tiny_config.storage), 6, failed=0)
    s = summarize(study)
    assert s.verdict.kind == "undecided" and s.deciding is not None and s.deciding.runs > 0
    code, out, _ = run_cli(monkeypatch, capsys, tmp_path, "status", "tiny", "--storage", tiny_config.storage)
    text = " ".join(out.split())
    assert code == 0 and f"deciding costs │ {s.deciding.runs} runs," in text, text
    assert f"at {s.deciding.tokens_per_s:,.0f} tokens/s (this study's median run)" in text
