"""Study and trial pages of constructed studies with known answers: confirmation runs in their own table and never
ranked, gaps compared at the same token count, rung fidelity drawn and warned about (real SQLite, no server)."""

import json
import re
from html import escape

import optuna
import pytest

from search.analysis.summary import summarize
from search.attrs import ATTR_CONFIRMATION_PLAN
from search.dashboard import figures as figs
from search.dashboard.pages import study_page, trial_page
from search.dashboard.report import write_report
from search.dashboard.views import same_budget_gap, study_view
from search.text import verdict_text
from tests.search.analysis.test_summary import UNIFORM, add, make_study, searched


@pytest.fixture
def confirmed(tiny_config):
    """Searched on seed 0, then `confirm --top 1 --seeds 3`: uniform's confirmation runs have the lowest losses."""
    study = make_study(tiny_config)
    searched(study)
    study.set_user_attr(ATTR_CONFIRMATION_PLAN, '{"schedules": ["1x3", "4x3"], "seeds": 3}')
    for seed, (base, best) in zip((1000, 1001, 1002), [(1.50, 1.49), (1.60, 1.58), (1.70, 1.67)]):
        add(study, UNIFORM, seed, base, role="confirm")
        add(study, "4x3", seed, best, role="confirm")
    return study


def _section(html: str, heading: str) -> str:
    return html.split(f"<h2>{heading}</h2>")[1].split("</table>")[0]


def _figure(html: str, fig_id: str) -> dict:
    return json.loads(re.search(rf'data-figure="fig-{fig_id}">(.*?)</script>', html, re.S).group(1))


def test_the_report_has_a_confirmation_table_and_confirmation_runs_never_rank(confirmed, tiny_config, tmp_path):
    html = write_report(tiny_config.storage, "known", tmp_path / "report.html").read_text()
    table = _section(html, "Confirmation on fresh seeds")
    assert "<td>1x3</td>" in table and "(uniform)" in table  # uniform first, as the reference row
    assert "1.5800 ± 0.0900" in table and "-0.0200 [-0.0448, +0.0048] (n=3, p=0.074)" in table and "inside the noise" in table
    best = _section(html, "Best trials")
    assert (
        "<td>confirm</td>" not in best and "<td>search</td>" in best and best.index("4x3") < best.index("1x3")
    )  # the search best first, confirm runs absent
    confirm_numbers = {t.number for t in confirmed.trials if t.user_attrs["role"] == "confirm"}
    history = _figure(html, "history")
    assert not confirm_numbers & {n for trace in history["data"] for n in trace.get("customdata", [])}
    assert min(history["data"][-1]["y"]) == pytest.approx(2.00)  # best so far never reaches a confirmation loss
    assert "on seeds it was not selected on -0.0200 [-0.0448, +0.0048] (n=3, p=0.074, adjusted p=" in html
    verdict = summarize(confirmed).verdict  # the report opens with the study's verdict, as `status` does
    assert html.index('id="verdict"') < html.index('id="summary"') and escape(verdict_text(verdict, confirmed.study_name)) in html
    gaps = _section(html, "Every schedule against uniform")
    assert "<td>4x3</td>" in gaps and "0, 1000, 1001, 1002" in gaps


def test_a_pruned_trial_is_compared_with_uniform_at_the_same_token_count(tiny_config):
    study = make_study(tiny_config)
    add(study, UNIFORM, 0, 2.05, role="baseline", curve={204_800: 2.60, 409_600: 2.30, 614_400: 2.05})
    study.add_trial(
        optuna.trial.create_trial(
            state=optuna.trial.TrialState.PRUNED,
            intermediate_values={204_800: 2.95},
            user_attrs={"schedule": "4x3", "seed": 0, "role": "search", "pruned_at_tokens": 204_800},
        )
    )
    view = study_view(study)
    pruned = view.row(1)
    gap, tokens = same_budget_gap(pruned, view.baseline)
    assert gap == pytest.approx(2.95 - 2.60) and tokens == 204_800  # not 2.95 - 2.05, the baseline's final loss
    html = trial_page(view, pruned, tiny_config.storage)
    assert "+0.3500 at 205k tokens, against trial 0 (seed 0)" in html and "+0.9000" not in html
    add(study, "2x3", 0, 2.01, curve={204_800: 2.50, 409_600: 2.20, 614_400: 2.01})
    view = study_view(study)
    assert same_budget_gap(view.row(2), view.baseline) == (pytest.approx(2.01 - 2.05), 614_400)  # both at the full budget
    assert "-0.0400 at 614k tokens" in trial_page(view, view.row(2), tiny_config.storage)


def test_rung_fidelity_is_drawn_with_error_bars_and_warned_about(tiny_config):
    study = make_study(tiny_config)
    finals = [2.0, 2.1, 2.2, 2.3, 2.4, 2.5]
    for k, final in enumerate(finals):  # at 100 tokens ranks agree with the final; at 200 they are reversed
        add(study, f"s{k}", 0, final, curve={100: final + 1, 200: 9 - final, 300: final})
    view = study_view(study)
    fig = figs.fidelity(view)
    rho = fig["data"][0]
    assert rho["x"] == [100, 200] and rho["y"] == pytest.approx([1.0, -1.0])
    assert rho["error_y"]["arrayminus"][1] == pytest.approx(0.0) and rho["marker"]["color"] == ["#3b6fb6", "#c44e52"]
    html = study_page(view, tiny_config.storage, live=False)
    assert 'class="warning">warning: pruning at 200 tokens is unreliable' in html and "<h2>Rung fidelity</h2>" in html
    assert "Pareto front" not in html and "Val loss × throughput (throughput not optimised): no throughput measured" in html


def test_too_few_complete_curves_and_single_objective_titles(memory_study, tiny_config):
    study = make_study(tiny_config)
    searched(study)
    view = study_view(study)
    assert figs.fidelity(view) is None
    html = study_page(view, tiny_config.storage, live=False)
    assert "Rung fidelity: not enough complete trials (needs 4 with a full learning curve)" in html
    assert figs.pareto_title(study_view(memory_study)) == "Val loss × throughput (throughput not optimised)"


def test_a_confirmation_run_is_compared_with_uniform_at_its_own_seed_and_a_plain_study_has_no_gap(confirmed, tiny_config):
    view = study_view(confirmed)
    run = next(r for r in view.rows if r.role == "confirm" and r.schedule == "4x3" and r.seed == 1001)
    html = trial_page(view, run, tiny_config.storage)
    assert "-0.0200 at the full budget" in html and "(seed 1001)" in html  # 1.58 - 1.60, not 1.58 - 2.05 (seed 0)
    plain = optuna.create_study()
    plain.optimize(lambda t: t.suggest_float("x", -1, 1) ** 2, n_trials=2)
    plain_view = study_view(plain)
    assert plain_view.baseline_for(plain_view.row(1)) is None
    assert 'id="gap"' not in trial_page(plain_view, plain_view.row(1), "memory")


def test_an_outside_trainer_s_trial_page_shows_its_folder_and_what_ran(tiny_config):
    """The folder holds the trial's report, logs and call.json; the call is what to type to run it again."""
    study = make_study(tiny_config)
    add(study, UNIFORM, 0, 2.05, role="baseline")
    where = {"host": "h", "pid": 1, "device": "cpu", "kernels": "trainer command"}
    folder, call = "/runs/tiny-abc/trial-00001", "cd /repo && python train.py --heads 4,4,4 <&>"
    add(study, "4x3", 0, 2.00, worker=where | {"folder": folder, "call": call})
    view = study_view(study)
    html = trial_page(view, view.row(1), tiny_config.storage)
    assert f'<td id="folder">{folder}</td>' in html and f'<td id="call"><code>{escape(call)}</code></td>' in html
    assert 'id="folder"' not in trial_page(view, view.row(0), tiny_config.storage)  # prism's own trials have none
