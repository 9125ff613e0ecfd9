"""summarize on constructed studies with known answers: paired gaps, the selected best before and after
confirmation, references, the confirmation table and rung fidelity (real SQLite, trials through the Optuna API)."""

import json

import optuna
import pytest
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState

from search.analysis.summary import FailedRun, ranked, summarize
from search.attrs import ATTR_CONFIG, ATTR_CONFIRMATION_PLAN, DUPLICATE_ATTR
from search.study.confirmation import collect
from search.text import crossed_text, failed_text, fidelity_warnings, gap_text, rung_warning, summary_json, verdict_text, warnings

UNIFORM = "1x3"  # studies/tiny.toml's baseline


def make_study(tiny_config, name="known"):
    study = optuna.create_study(study_name=name, storage=tiny_config.storage)
    study.set_user_attr(ATTR_CONFIG, tiny_config.model_copy(update={"name": name}).model_dump_json())
    return study


def add(study, schedule, seed, loss, role="search", curve=None, state=TrialState.COMPLETE, **attrs):
    study.add_trial(
        optuna.trial.create_trial(
            state=state,
            value=loss,
            params={"x": 0.0},
            distributions={"x": FloatDistribution(0, 1)},
            user_attrs={"schedule": schedule, "seed": seed, "role": role, **attrs},
            intermediate_values=curve or {},
        )
    )


def searched(study):
    add(study, UNIFORM, 0, 2.05, role="baseline")
    add(study, UNIFORM, 1, 2.08, role="baseline")
    add(study, "4x3", 0, 2.00)  # the best on the search seed: gap -0.05 from one pair
    add(study, "2x3", 0, 2.03)
    add(study, "1x1,2x1,4x1", 0, 2.10, role="reference", reference="ramp")


def test_the_best_is_one_pair_selected_from_n_until_confirmed(tiny_config):
    study = make_study(tiny_config)
    searched(study)
    s = summarize(study)
    assert s.best_schedule == "4x3" and s.baseline_value == 2.05  # of 4 schedules on seed 0: uniform, 2 searched, 1 reference
    assert s.best_gap.all_seeds.n == 1 and s.best_gap.all_seeds.mean == pytest.approx(-0.05) and s.best_gap.unselected is None
    assert gap_text(s) == (
        "-0.0500 (n=1: noise not measured yet; run `prism-search confirm known --top 3 --seeds 3`), selected as best of 4 schedules"
    )  # the verdict's command: one command, one count, everywhere
    assert s.verdict.kind == "undecided" and s.uniform_noise_floor == pytest.approx(0.03 / 2**0.5)
    command = summary_json(s)["verdict"]["command"]
    assert command == "prism-search confirm known --top 3 --seeds 3"  # no noise measured: every schedule is open
    ref = s.references[0]
    assert ref.name == "ramp" and ref.gap.all_seeds.mean == pytest.approx(0.05) and ref.gap.selected_from is None
    assert "±" not in gap_text(s) and "σ" not in gap_text(s)


def test_the_baseline_is_the_baseline_run_never_a_search_trial_that_trained_the_uniform_schedule(tiny_config):
    """A search trial may train the uniform schedule at the study seed after the baseline did (another machine,
    another value): the baseline's value and every gap still come from the baseline run alone."""
    study = make_study(tiny_config)
    searched(study)
    add(study, UNIFORM, 0, 2.20)  # the last COMPLETE run of (uniform, study seed)
    s = summarize(study)
    assert s.baseline_value == 2.05 and s.best_gap.all_seeds.mean == pytest.approx(-0.05)
    assert s.references[0].gap.all_seeds.mean == pytest.approx(0.05)

    failed = make_study(tiny_config, "failed")  # no baseline run completed: none stands in for it
    add(failed, UNIFORM, 0, None, role="baseline", state=TrialState.FAIL)
    add(failed, UNIFORM, 0, 2.20)
    add(failed, "4x3", 0, 2.00)
    s = summarize(failed)
    assert s.baseline_value is None and s.best_gap is None and gap_text(s) == "n/a"
    assert s.verdict.kind == "undecided" and s.best_schedule == "4x3"  # nothing paired: the best run, undecided


def test_baseline_and_reference_runs_whose_every_try_failed_are_listed_as_failed_for_good(tiny_config):
    study = make_study(tiny_config)
    add(study, UNIFORM, 0, None, role="baseline", state=TrialState.FAIL, error="worker died (retry 1/2 queued)")
    add(study, UNIFORM, 0, 2.05, role="baseline")  # its retry trained: not failed
    add(study, UNIFORM, 1, None, role="baseline", state=TrialState.FAIL, error="worker died")
    add(study, UNIFORM, 1, None, role="baseline", state=TrialState.FAIL, error="TrainingDiverged: loss 9.1")
    add(study, "1x1,2x1,4x1", 0, None, role="reference", state=TrialState.FAIL, reference="ramp")
    add(study, "4x3", 0, None, state=TrialState.FAIL, error="worker died")  # a search trial: the sampler moves on
    s = summarize(study)
    assert s.failed_runs == [
        FailedRun(3, "baseline", UNIFORM, 1, "TrainingDiverged: loss 9.1"),
        FailedRun(4, "reference", "1x1,2x1,4x1", 0, None),
    ]
    assert s.failed_trials == [FailedRun(5, "search", "4x3", 0, "worker died")]
    assert failed_text(s).startswith(
        f"baseline {UNIFORM} seed 1 (trial 3: TrainingDiverged: loss 9.1); reference 1x1,2x1,4x1 seed 0 (trial 4: no error recorded); "
    )
    assert failed_text(s).endswith(
        "`prism-search resume known` queues them once more (a divergence repeats: that needs a new study with other train settings)"
    )


def test_the_confirmed_gap_uses_only_confirmation_seeds_and_confirm_runs_never_compete(tiny_config):
    study = make_study(tiny_config)
    searched(study)
    study.set_user_attr(ATTR_CONFIRMATION_PLAN, '{"schedules": ["1x3", "4x3"], "seeds": 3}')
    for seed, (base, best) in zip((1000, 1001, 1002), [(1.50, 1.49), (1.60, 1.58), (1.70, 1.67)]):
        add(study, UNIFORM, seed, base, role="confirm")  # lower than any search loss: must not become "best"
        add(study, "4x3", seed, best, role="confirm")
    add(study, "4x3", 1000, 1.49, role="confirm", **{DUPLICATE_ATTR: 6})  # a cache hit: the same run, counted once
    s = summarize(study)
    assert s.best_schedule == "4x3" and s.best_number == 2 and all(t.user_attrs["role"] != "confirm" for t in ranked(study, tiny_config))
    # off its selection seed: diffs -0.01, -0.02, -0.03, mean -0.02; the blocked model's residual df (2) all come
    # from these pairs, so the interval is the paired t's: t(0.975, 2) * 0.01 / sqrt(3) = 0.02484
    fresh = s.best_gap.unselected
    assert fresh.n == 3 and fresh.mean == pytest.approx(-0.02)
    assert fresh.low == pytest.approx(-0.04484, abs=1e-5) and fresh.high == pytest.approx(0.00484, abs=1e-5)
    assert fresh.p == pytest.approx(0.0742, abs=1e-4) and fresh.adjusted_p >= fresh.p  # Holm over the family
    assert s.best_gap.all_seeds.n == 4 and s.best_gap.all_seeds.mean == pytest.approx(-0.0275)  # the selection seed too
    # the two values shown side by side are means over the same four seeds: they differ by the paired mean gap
    assert s.best_value == pytest.approx(1.685) and s.baseline_value == pytest.approx(1.7125)
    assert gap_text(s).startswith("on seeds it was not selected on -0.0200 [-0.0448, +0.0048] (n=3, p=0.074, adjusted p=")
    assert gap_text(s).endswith("inside the noise; all 4 seeds -0.0275, selected as best of 4 schedules")
    rows = s.confirmation
    assert [r.schedule for r in rows] == [UNIFORM, "4x3"] and [r.seeds for r in rows] == [3, 3]
    assert rows[0].gap is None and rows[1].gap.mean == pytest.approx(-0.02) and rows[1].gap.n == 3
    assert rows[1].val_loss_mean == pytest.approx(1.58) and rows[1].val_loss_std == pytest.approx(0.09)
    assert collect(study) == rows
    assert summary_json(s)["best_gap"]["unselected"]["n"] == 3


def test_rung_fidelity_from_the_study_s_own_curves(tiny_config):
    study = make_study(tiny_config)  # tiny: reduction_factor 3 (the default)
    finals = [2.0, 2.1, 2.2, 2.3, 2.4, 2.5]
    for k, final in enumerate(finals):  # at 100 tokens ranks agree with the final; at 200 they are reversed
        add(study, f"s{k}", 0, final, curve={100: final + 1, 200: 9 - final, 300: final})
    add(study, "short", 0, 2.6, curve={100: 3.0})  # no full curve: left out
    s = summarize(study)
    early, late = s.fidelity  # six runs at one seed: exact permutation p-values, the best by mean is s0
    assert (early.tokens, early.agreement.n, early.best_kept) == (100, 6, True) and early.agreement.rho == pytest.approx(1.0)
    assert early.agreement.p == pytest.approx(1 / 720) and early.reliable
    assert (late.tokens, late.best_kept) == (200, False) and late.agreement.rho == pytest.approx(-1.0)
    assert fidelity_warnings(s) == [rung_warning(late)] and "pruning at 200 tokens is unreliable" in rung_warning(late)


def test_fewer_than_four_complete_curves_say_so(tiny_config):
    study = make_study(tiny_config)
    searched(study)
    assert summarize(study).fidelity is None and fidelity_warnings(summarize(study)) == []


def test_status_and_best_print_the_paired_gap_confirmation_table_and_fidelity_warning(tiny_config, monkeypatch):
    from typer.testing import CliRunner

    from search import cli

    app = cli.app
    monkeypatch.setattr(cli.console, "width", 250)  # one table row per line, as on a wide terminal

    study = make_study(tiny_config)
    searched(study)
    for k, final in enumerate([2.0, 2.1, 2.2, 2.3, 2.4, 2.5]):
        add(study, f"s{k}", 1, final, curve={100: final + 1, 200: 9 - final, 300: final})
    for seed, (base, best) in zip((1000, 1001, 1002), [(1.50, 1.49), (1.60, 1.58), (1.70, 1.67)]):
        add(study, UNIFORM, seed, base, role="confirm")
        add(study, "4x3", seed, best, role="confirm")
    url = ["--storage", tiny_config.storage]
    out = CliRunner().invoke(app, ["status", "known", *url])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    verdict = summarize(study).verdict
    assert lines[0] == f"known: {verdict_text(verdict, 'known')}" and verdict.kind == "undecided" and verdict.schedule == "s0"
    assert "gaps computed by" in out.output and "blocked model (schedule + seed)" in out.output
    assert any(line.strip().startswith("│   4x3") and "seeds 0, 1000, 1001, 1002" in line for line in lines)
    assert "confirmation of known" in out.output and "1.5800 ± 0.0900" in out.output
    assert "fidelity at 200 tokens" in out.output and "warning: pruning at 200 tokens is unreliable" in out.output
    assert "noise floor of uniform" in out.output and "σ" not in out.output
    as_json = CliRunner().invoke(app, ["status", "known", *url, "--json"]).stdout
    summary = json.loads(as_json[as_json.index("{") :])
    assert summary["verdict"]["kind"] == "undecided" and summary["verdict"]["text"] == verdict_text(verdict, "known")
    step = verdict.next
    assert summary["verdict"]["margin"] == 0.01 and step is not None
    assert summary["verdict"]["command"] == f"prism-search confirm known --top {step.top} --seeds {step.seeds}"
    assert summary["confirmation"][1]["gap"]["n"] == 3 and summary["best_schedule"] == "s0"
    assert summary["fidelity"][1]["tokens"] == 200 and len(summary["fidelity_warnings"]) == 1
    best = CliRunner().invoke(app, ["best", "known", *url]).stdout.splitlines()
    assert best[0] == f"verdict\t{verdict_text(verdict, 'known')}" and best[1].startswith("s0\tval_loss 2.0000\tgap to uniform -0.0800")


def test_the_end_of_a_run_names_confirm_until_the_best_is_confirmed(tiny_config, monkeypatch, capsys):
    from search import cli

    monkeypatch.setattr(cli.console, "width", 250)
    study = make_study(tiny_config)
    searched(study)
    cli._print_summary(summarize(study), 12.0)
    out = capsys.readouterr().out
    assert out.startswith("known: undecided at margin 0.01") and "prism-search confirm known --top 3 --seeds 3" in out.splitlines()[0]
    assert "train the seeds that decide: prism-search confirm known --top 3 --seeds 3" in out
    cli._print_summary(summarize(study), None)  # `status`: the verdict names it already, no "next" row
    assert "train the seeds that decide" not in capsys.readouterr().out
    for seed in (1000, 1001, 1002):  # 4x3 better by 0.01 at every fresh seed: decided
        add(study, UNIFORM, seed, 1.5, role="confirm")
        add(study, "4x3", seed, 1.49, role="confirm")
    cli._print_summary(summarize(study), 12.0)
    out = capsys.readouterr().out
    assert out.startswith("known: better: 4x3 beats uniform by -0.0100") and "train the seeds that decide" not in out


def test_when_uniform_is_the_best_the_gap_shown_is_the_runner_up_s_never_uniform_against_itself(tiny_config, monkeypatch, capsys):
    from search import cli

    monkeypatch.setattr(cli.console, "width", 250)
    study = make_study(tiny_config)
    add(study, UNIFORM, 0, 2.00, role="baseline")
    s = summarize(study)
    assert s.best_schedule == UNIFORM and s.best_gap is None and s.runner_up is None
    assert gap_text(s) == "none yet: uniform is the only schedule finished"
    add(study, "4x3", 0, 2.03)
    add(study, "2x3", 0, 2.01)  # the best other: +0.01 worse than uniform, picked from the 2 others
    s = summarize(study)
    assert s.best_schedule == UNIFORM and s.runner_up == "2x3" and s.best_gap.all_seeds.mean == pytest.approx(0.01)
    assert gap_text(s) == (
        "none: uniform is the best schedule by paired mean; the best other, 2x3: +0.0100 (n=1: noise not measured "
        "yet; run `prism-search confirm known --top 2 --seeds 3`), selected as best of 2 schedules"
    )
    cli._print_summary(summarize(study), 12.0)
    assert "train the seeds that decide: prism-search confirm known --top 2 --seeds 3" in capsys.readouterr().out


def test_a_seed_trained_on_mixed_hardware_is_warned_about(tiny_config):
    study = make_study(tiny_config)
    add(study, UNIFORM, 0, 2.05, role="baseline", worker={"pid": 1, "kernels": "cpu AVX512"})
    add(study, "4x3", 0, 2.00, worker={"pid": 2, "kernels": "cpu AVX512"})
    add(study, "2x3", 0, 2.03)  # trained before workers recorded their kernels: says nothing
    add(study, UNIFORM, 1, 2.06, role="confirm", worker={"pid": 4, "kernels": "cpu AVX2"})
    add(study, "4x3", 1, 2.01, role="confirm", worker={"pid": 5, "kernels": "cpu AVX2"})
    s = summarize(study)  # each seed on one kind: its pairs are exact, whichever kind it had
    assert s.kernels == ["cpu AVX2", "cpu AVX512"] and s.mixed_seeds == [] and warnings(s) == []
    add(study, "1x3", 0, 2.04, worker={"pid": 3, "kernels": "cpu AVX2"})
    s = summarize(study)
    assert s.mixed_seeds == [0] and summary_json(s)["warnings"] == warnings(s)
    assert warnings(s) == [
        "at seed 0 the runs were trained on more than one kind of hardware (cpu AVX2, cpu AVX512 in the study): the "
        "same run differs across kinds, so paired gaps there carry that difference too; keep the runs of a seed on one kind"
    ]


def test_pairs_across_hardware_are_counted_and_the_verdict_is_read_without_them_too(tiny_config, capsys):
    """A pair is exact only when both its runs used the same kernels: status names the pairs that crossed and gives
    the verdict on the others beside the one on all."""
    from search import cli

    study = make_study(tiny_config)
    avx512, avx2 = {"pid": 1, "kernels": "cpu AVX512"}, {"pid": 2, "kernels": "cpu AVX2"}
    for seed, (u, a, b) in enumerate([(2.05, 2.04, 2.06), (2.08, 2.06, 2.09), (2.02, 2.01, 2.03)]):
        add(study, UNIFORM, seed, u, role="baseline" if seed == 0 else "confirm", worker=avx512)
        add(study, "4x3", seed, a, role="search" if seed == 0 else "confirm", worker=avx512)
        add(study, "2x3", seed, b, role="search" if seed == 0 else "confirm", worker=avx512)
    s = summarize(study)
    assert s.crossed_pairs == [] and s.verdict_one_kind is None and summary_json(s)["verdict_one_kind"] is None
    add(study, UNIFORM, 3, 2.00, role="confirm", worker=avx512)
    add(study, "4x3", 3, 1.90, role="confirm", worker=avx2)  # a big gap, from a run on other kernels
    add(study, "2x3", 3, 2.01, role="confirm", worker=avx512)
    s = summarize(study)
    assert s.crossed_pairs == [("4x3", 3)]
    assert crossed_text(s) == f"1 pair (4x3 seed 3) ran on two kinds of hardware; without them: {verdict_text(s.verdict_one_kind, 'known')}"
    without = s.verdict_one_kind
    assert without is not None and without.effect != s.verdict.effect  # read on the exact pairs alone
    assert summary_json(s)["verdict_one_kind"]["text"] == verdict_text(without, "known")
    cli._print_summary(s, None)
    cells = " ".join(capsys.readouterr().out.replace("│", " ").split())  # the table's cell text, borders and wraps gone
    assert "across hardware" in cells and "1 pair (4x3 seed 3) ran on two kinds of hardware; without them:" in cells


def test_a_confirmation_on_two_seeds_still_says_the_noise_is_not_measured(tiny_config):
    study = make_study(tiny_config)
    searched(study)
    for seed in (1000, 1001):
        add(study, UNIFORM, seed, 1.50, role="confirm")
        add(study, "4x3", seed, 1.48 + 0.01 * (seed - 1000), role="confirm")
    assert gap_text(summarize(study)) == (
        "on seeds it was not selected on -0.0150 (n=2: noise not measured yet; run `prism-search confirm known --top 2 --seeds 36`); "
        "all 3 seeds -0.0267, selected as best of 4 schedules"
    )


def test_references_are_queued_at_every_baseline_seed_and_reported_once_with_every_pair(tiny_config):
    from optuna.trial import TrialState

    from search.runner.preflight import check_corpus
    from search.storage import open_storage
    from search.study.create import open_study

    config = tiny_config.model_copy(update={"space": tiny_config.space.model_copy(update={"references": ["ramp=1x1,2x1,4x1"]})})
    study = open_study(config, open_storage(config.storage), check_corpus(config)).study
    queued = [(t.user_attrs["role"], t.user_attrs["seed"]) for t in study.get_trials(states=(TrialState.WAITING,))]
    assert queued == [("baseline", 0), ("baseline", 1), ("reference", 0), ("reference", 1)]  # tiny: baseline_seeds 2

    known = make_study(tiny_config.model_copy(update={"space": config.space}))
    searched(known)
    add(known, "1x1,2x1,4x1", 1, 2.12, role="reference", reference="ramp")  # the reference at the second baseline seed
    (ref,) = summarize(known).references  # one row per reference, not one per seed
    assert ref.val_loss == 2.10 and ref.gap.all_seeds.n == 2 and ref.gap.all_seeds.mean == pytest.approx((0.05 + 0.04) / 2)
