"""The read model and the figures, as pure functions of studies made through the Optuna API (no server)."""

import dataclasses
import json
import math
import re
import subprocess
import sys

import optuna
from hypothesis import given
from hypothesis import strategies as st

from search.analysis.summary import pareto_front
from search.dashboard import figures as figs
from search.dashboard.views import MIN_TRIALS_FOR_IMPORTANCE, layer_importance, study_view
from tests.search.conftest import ROOT
from tests.search.dashboard.conftest import quickstart
from tests.search.synthetic import EARLY_HEAD_PENALTY, synthetic_study


def test_rows_decode_the_attrs_the_driver_writes(memory_study):
    view = study_view(memory_study)
    trials = memory_study.get_trials()
    assert [r.number for r in view.rows] == [t.number for t in trials]
    for r, t in zip(view.rows, trials):
        assert r.state == t.state.name and r.role == t.user_attrs["role"]
        assert list(r.heads) == [t.user_attrs[f"heads_{i:02d}"] for i in range(4)]
        assert [tok for tok, _ in r.curve] == sorted(t.intermediate_values)
        if t.state.name == "COMPLETE":
            assert r.val_loss == t.value and r.tokens_per_s == t.user_attrs["tokens_per_s"]
    assert view.status == "running" and view.counts == {s: sum(t.state.name == s for t in trials) for s in view.counts}
    assert view.baseline.role == "baseline" and view.baseline.seed == view.config.seed
    assert view.baseline.schedule == view.summary.baseline_schedule and view.baseline.val_loss is not None
    assert next(r for r in view.rows if r.state == "FAIL").error.startswith("TrainingDiverged")


def _brute_front(points):
    return sorted(i for i, (l, t) in enumerate(points) if not any((l2 <= l and t2 >= t) and (l2, t2) != (l, t) for l2, t2 in points))


@given(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 20)), min_size=1, max_size=40, unique=True))
def test_pareto_front_matches_the_pairwise_definition(points):
    assert sorted(pareto_front(points)) == _brute_front(points)


def test_layer_importance_finds_the_layer_whose_head_count_matters(memory_study):
    scores = layer_importance(study_view(memory_study).rows)
    assert list(scores) == [0, 1, 2, 3], "importance is per decoded layer, not per encoding param (switch_k)"
    assert math.isclose(sum(scores.values()), 1.0)
    # the synthetic law penalises a single head most in layer 0 and not at all in layer 3
    assert EARLY_HEAD_PENALTY[0] == max(EARLY_HEAD_PENALTY)
    assert max(scores, key=scores.get) == 0 and scores[0] > scores[3]


def test_layer_importance_needs_enough_varied_trials():
    few = synthetic_study(quickstart("few"), None, MIN_TRIALS_FOR_IMPORTANCE - 3, failed=0)
    assert layer_importance(study_view(few).rows) is None
    # the uniform family gives every layer the same count: no layer can explain more than another
    config = quickstart("uniform")
    config = config.model_copy(update={"space": config.space.model_copy(update={"family": "uniform"})})
    scores = layer_importance(study_view(synthetic_study(config, None, 20, failed=0)).rows)
    assert scores is not None and max(scores.values()) - min(scores.values()) < 1e-9


def _points(fig) -> int:
    return sum(len([v for v in (t.get("z") or t.get("y") or []) if v is not None]) for t in fig["data"])


def test_every_study_figure_has_data_and_is_valid_json(memory_study):
    view = study_view(memory_study)
    made = {fig_id: fig for fig_id, fig, _ in figs.study_figures(view)}
    assert set(made) == {"history", "pareto", "importance", "heatmap", "curves", "fidelity", "timeline"}
    for fig_id, fig in made.items():
        assert fig is not None and _points(fig) > 0, fig_id
        json.loads(fig.to_json())  # allow_nan=False: plotly.js's JSON.parse would reject NaN
    complete = sorted(r.val_loss for r in view.rows if r.state == "COMPLETE")
    best_so_far = made["history"]["data"][-1]["y"]
    assert best_so_far == sorted(best_so_far, reverse=True) and best_so_far[-1] == complete[0]
    # heatmap rows go best first and colour log2 of each layer's heads
    hm = made["heatmap"]["data"][0]
    best = min((r for r in view.rows if r.state == "COMPLETE"), key=lambda r: r.val_loss)
    assert hm["customdata"][0][0] == best.number and hm["z"][0] == [math.log2(h) for h in best.heads]
    assert hm["y"][0] == f"1. {best.schedule}" and len(set(hm["y"])) == len(hm["y"])  # each row names its schedule
    pruned = [r for r in view.rows if r.state == "PRUNED"]
    marks = next(t for t in made["curves"]["data"] if t["name"] == "pruned here")
    assert sorted(marks["customdata"]) == [r.number for r in pruned] and pruned
    segments = sum(len([x for x in t["x"] if x is not None]) // 2 for t in made["timeline"]["data"])
    assert segments == len(view.rows)


def test_pareto_uses_the_second_objective_when_the_study_has_two():
    study = synthetic_study(quickstart("mo"), None, 8, failed=0, multi_objective=True)
    view = study_view(study)
    assert view.metric_names == ["val_loss", "tokens_per_s"]
    fig = figs.pareto(view)
    xs = sorted(x for t in fig["data"] if t["name"] != "Pareto front" for x in t["x"])
    assert xs == sorted(t.values[1] for t in study.trials if t.state.name == "COMPLETE")
    assert figs.curves(view) is not None, "multi-objective trials report no intermediate values: the curve attr is used"


def test_figures_degrade_to_notes_on_an_empty_or_plain_study():
    empty = synthetic_study(quickstart("empty"), None, 0, failed=0)
    assert all(fig is None for _, fig, _ in figs.study_figures(study_view(empty)))
    plain = optuna.create_study()
    plain.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=3)
    view = study_view(plain)
    assert view.config is None and view.summary is None
    made = {i: f for i, f, _ in figs.study_figures(view)}
    assert made["history"] is not None and made["heatmap"] is None and made["importance"] is None


def test_trial_figures_compare_with_the_baseline_and_show_audits_only_when_stored(memory_study):
    view = study_view(memory_study)
    base = view.baseline
    audited = next(r for r in view.rows if r.audit and r.role == "search")
    plain = next(r for r in view.rows if not r.audit and r.curve)
    profiles = dict(figs.audit_profiles(audited, base))
    assert "audit-mad" in profiles and len(profiles["audit-mad"]["data"]) == 2  # trial and uniform baseline
    assert figs.audit_profiles(plain, base) == []
    diagram = figs.schedule_diagram(audited, base, d_model=128)
    assert diagram["data"][0]["y"] == list(audited.heads) and diagram["data"][1]["y"] == list(base.heads)
    assert diagram["data"][0]["text"][0] == f"{audited.heads[0]} × {128 // audited.heads[0]}"


def test_a_prior_auto_audit_on_the_study_shows_on_the_audited_trial():
    import torch

    from prism import ModelConfig, PrismLM, Schedule
    from search.priors.audit import audit_model

    torch.manual_seed(0)
    model = PrismLM(ModelConfig(n_layer=3, d_model=64, block_size=32, dh_min=16, dh_max=64), Schedule.parse("1x3"))
    study = optuna.create_study(study_name="audited")
    study.optimize(lambda t: 1.0, n_trials=2)
    study.set_user_attr("prism.audit", json.dumps(audit_model(model, source="audited:1", n_probes=2).to_dict()))
    rows = study_view(study).rows
    assert rows[0].audit is None  # only the audited trial carries it
    assert len(rows[1].audit) == 3 and {"mad_relative", "matrix_entropy", "depth_curvature"} <= set(rows[1].audit[0])


def test_no_figure_title_repeats_itself_and_every_title_starts_below_the_toolbar(memory_study):
    two = study_view(synthetic_study(quickstart("mo"), None, 8, failed=0, multi_objective=True))
    for view in (study_view(memory_study), two):
        for fig_id, fig, _ in figs.study_figures(view):
            if fig is None:  # not drawn yet (importance, fidelity in the small study): a note, no title
                continue
            title = fig["layout"]["title"]
            words = re.findall(r"[a-z]+", title["text"].lower())
            phrases = [" ".join(words[i : i + 2]) for i in range(len(words) - 1)]
            assert len(phrases) == len(set(phrases)), (fig_id, title["text"])  # "val loss × throughput: val loss × throughput"
            assert title["yref"] == "container" and title["pad"]["t"] >= figs.TITLE_BELOW_TOOLBAR_PX, fig_id
            assert fig["layout"]["margin"]["t"] > title["pad"]["t"] + 20, fig_id  # the plot area starts below the title


def test_the_importance_note_says_how_far_a_quickstart_size_study_is_from_the_panel():
    view = study_view(synthetic_study(quickstart("q"), None, 8, failed=0))
    have = sum(1 for r in view.rows if r.state == "COMPLETE" and r.heads)
    note = {i: n for i, _, n in figs.study_figures(view)}["importance"]
    need = MIN_TRIALS_FOR_IMPORTANCE
    assert figs.importance(view) is None and 0 < have < need
    assert note == f"needs {need} completed trials with a schedule; this study has {have} ({need - have} to go)"


def test_thin_keeps_what_it_is_told_and_an_even_spread_of_the_rest_in_order(memory_study):
    rows = study_view(memory_study).rows
    kept = [rows[7], rows[3]]
    drawn = figs.thin(rows, 10, kept)
    assert len(drawn) == 10 and {r.number for r in kept} <= {r.number for r in drawn}
    assert [r.number for r in drawn] == sorted(r.number for r in drawn)  # the study's order, as plotted
    assert drawn == figs.thin(rows, 10, kept)  # the same points on every refresh of an unchanged study
    assert figs.thin(rows, len(rows), kept) == rows and len(figs.thin(rows, 1, kept)) == 1


def test_a_5000_trial_page_draws_a_sample_says_so_and_stays_under_a_megabyte(memory_study):
    """Every figure of 5,000 trials in full is 2.7 MB of JSON in the page, more points than a browser shows apart:
    each figure draws the trials a reader looks for and an even spread of the rest, and says so under it."""
    from search.dashboard.pages import study_page

    view = study_view(memory_study)
    assert "data-sampled" not in study_page(view, "sqlite:///x.db")  # a small study draws every trial
    rows = [dataclasses.replace(view.rows[n % len(view.rows)], number=n) for n in range(5000)]
    big = dataclasses.replace(view, rows=rows)
    html = study_page(big, "sqlite:///x.db")
    assert len(html.encode()) < 1_000_000
    sampled = dict(re.findall(r'data-sampled="(\w+)">([^<]*)<', html))
    assert set(sampled) == {"history", "pareto", "heatmap", "curves", "timeline"}
    assert sampled["history"].startswith(f"{figs.MAX_POINTS:,} of {len(big.searched):,} trials drawn")
    assert sampled["heatmap"].startswith(f"the best {figs.MAX_HEATMAP_ROWS} of")
    history = json.loads(re.search(r'data-figure="fig-history">(.*?)</script>', html, re.S).group(1))
    drawn = {n for t in history["data"] if t["name"] != "best so far" for n in t["customdata"]}
    best = min(big.searched, key=lambda r: r.val_loss)
    assert best.number in drawn and big.baseline.number in drawn
    line = next(t for t in history["data"] if t["name"] == "best so far")
    assert line["y"][-1] == best.val_loss and line["y"] == sorted(line["y"], reverse=True)  # the whole study's best so far


def test_the_importance_panel_loads_no_scikit_learn_and_leaves_it_importable():
    """PED-ANOVA needs none of it, and importing it cost a third of a fresh dashboard's first page of 5,000 trials."""
    code = (
        "import sys; from search.dashboard.views import _importance\n"
        "scores = _importance(tuple(((i % 4, (i // 4) % 4), float(i % 4)) for i in range(40)))\n"
        "assert scores[0] > scores[1] and 'sklearn' not in sys.modules, scores"  # not loaded, nor left marked absent
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=120)


def test_a_refresh_takes_cached_rows_as_read_and_still_leaves_a_malformed_trial_out(memory_study):
    """Finished trials whose rows are cached are not checked again (they passed and cannot change); a malformed
    one is never cached, so every refresh leaves it out and the summary names it."""
    memory_study.add_trial(optuna.trial.create_trial(value=1.0, user_attrs={"curve": "not a curve"}))
    bad = memory_study.trials[-1].number
    cache: dict = {}
    first = study_view(memory_study, cache)
    memory_study.add_trial(optuna.trial.create_trial(value=1.0, user_attrs={"role": "search", "seed": 0}))  # the study moves on
    again = study_view(memory_study, cache)
    for view in (first, again):
        assert view.row(bad) is None and bad in view.summary.left_out
    assert [r.number for r in again.rows] == [r.number for r in first.rows] + [bad + 1]
    assert all(a is b for a, b in zip(again.rows, first.rows) if a.state != "RUNNING")  # the cached rows themselves
