"""The committed pre-registered experiment (docs/results/prereg.db) is the one studies/prereg-long.toml fixed: its
plan cannot drift from the file without this failing, and every run it holds belongs to a pair of the plan."""

import shutil

from optuna.trial import TrialState

from search.analysis.sequential import plan_of
from search.analysis.stored import stored_study
from search.config import load_config
from search.storage.records import stored_config
from search.text import confirm_command, gap_text, look_texts, method_text, state_text, verdict_text, warnings
from tests.search.conftest import ROOT


def test_the_committed_experiment_is_the_pre_registered_one(tmp_path):
    db = tmp_path / "prereg.db"
    shutil.copy(ROOT / "docs" / "results" / "prereg.db", db)  # read a copy: the committed file stays as it is
    study = stored_study("prereg-long", f"sqlite:///{db}")
    stored, registered = stored_config(study), load_config(ROOT / "studies" / "prereg-long.toml")
    plan = plan_of(stored)
    assert plan is not None and plan == plan_of(registered)
    fixed = (plan.schedule, plan.uniform, plan.first_seed, plan.looks, plan.margin, plan.alpha)
    assert fixed == ("2x3,4x3", "2x6", 2000, (10, 15, 20), 0.01, 0.05)
    for section in ("model", "train", "data"):
        assert getattr(stored, section) == getattr(registered, section), section
    bench_long = load_config(ROOT / "studies" / "bench-long.toml")
    assert (stored.model, stored.train, stored.data) == (bench_long.model, bench_long.train, bench_long.data)  # bench-long's budget
    done = [t for t in study.get_trials() if t.state == TrialState.COMPLETE]
    seeds = sorted({t.user_attrs["seed"] for t in done})
    assert seeds == list(range(2000, 2000 + len(seeds)))  # new seeds only, in order, never bench-long's 0, 1, 1000, 1001
    assert all(sorted(t.user_attrs["schedule"] for t in done if t.user_attrs["seed"] == s) == ["2x3,4x3", "2x6"] for s in seeds)
    # both runs of a pair on one machine: the same kind of hardware did their arithmetic
    assert all(len({t.user_attrs["worker"]["kernels"] for t in done if t.user_attrs["seed"] == s}) == 1 for s in seeds)


def test_its_summary_reads_as_an_experiment(tmp_path):
    """Nothing in an experiment was selected, and its noise is measured by its own next pairs, not by `confirm`."""
    from search.analysis import summarize

    db = tmp_path / "prereg.db"
    shutil.copy(ROOT / "docs" / "results" / "prereg.db", db)
    s = summarize(stored_study("prereg-long", f"sqlite:///{db}"))
    assert s.looks is not None and confirm_command(s) == "prism-search resume prereg-long"
    assert s.best_gap is not None and s.best_gap.selected_from is None
    assert s.mixed_seeds == [] and warnings(s) == []  # each pair on one kind of hardware: no warning
    text = gap_text(s)  # no better/worse word between looks, only the looks judge; the gap over all pairs, listed once
    assert text.endswith("for reading only: the pre-registered test decides at its looks") and s.gaps == []
    assert not any(word in text for word in ("better", "worse", "inside the noise"))
    assert "pre-registered" in method_text(s.verdict.method)
    assert verdict_text(s.verdict, s.name).startswith(("undecided", "equivalent", "better", "worse"))


def test_the_dashboard_shows_each_look_it_has_read(tmp_path):
    import html

    from search.dashboard.pages import study_page
    from search.dashboard.views import study_view

    db = tmp_path / "prereg.db"
    shutil.copy(ROOT / "docs" / "results" / "prereg.db", db)
    view = study_view(stored_study("prereg-long", f"sqlite:///{db}"))
    assert view.summary is not None and view.summary.looks  # the first look (10 pairs) is committed
    page = html.unescape(study_page(view, f"sqlite:///{db}"))
    assert 'id="looks"' in page and all(look in page for look in look_texts(view.summary))
    assert "<th>challenger schedule</th>" in page and "best schedule" not in page  # fixed before its data, not picked


def test_the_results_page_says_where_the_committed_experiment_stands(tmp_path):
    """docs/results.md answer 4 counts the pairs the committed database holds, while the experiment runs."""
    import re

    from search.study.experiment import current

    db = tmp_path / "prereg.db"
    shutil.copy(ROOT / "docs" / "results" / "prereg.db", db)
    study = stored_study("prereg-long", f"sqlite:///{db}")
    config = stored_config(study)
    now = current(study, config, plan_of(config))
    text = (ROOT / "docs" / "results.md").read_text()
    said = re.search(r"\*\*Status: running; (\d+) of the (\d+) pairs before the (\w+) look are trained\*\*", text)
    if now.outcome == "running":
        upcoming = next(n for n in now.plan.looks if n > now.pairs)
        assert said and (int(said[1]), int(said[2])) == (now.pairs, upcoming), (said and said[0], state_text(now))
    else:
        assert said is None and now.outcome in text  # a decided experiment is reported with its outcome
